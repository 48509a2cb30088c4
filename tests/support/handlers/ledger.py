"""Test handlers that keep a ledger outside Redis, for the fault-injection suite.

The ledger is a directory named by the environment variable FAULTS_LEDGER_DIR (not
STAGEDOOR_*: the settings loader refuses unknown STAGEDOOR_ variables):

    ledger.jsonl    one JSON line per event, appended with O_APPEND and a single
                    os.write per line, so lines of concurrent processes never interleave:
                    {"event": "start"|"done"|"effect_exists"|"failed", "outbox_id", "pid",
                     "kind", "t"}
                    a done line of a redelivery that found the job already done carries
                    "skipped": true; a run that raised (its own Redis call timed out, a
                    time limit cancelled it) writes a "failed" line with the error, and the
                    next start of that job in the same process carries "after_failure":
                    true: the retry policy's run, or a re-read of the worker's own pending
                    list after Redis failed the job, not a second delivery
    effects/<id>    the side effect: one file per outbox_id, created with O_EXCL
    gates/<id>      created by the test to release a held handler

Kinds (all registered in `registry` through `kind()`, which writes each run's start line
before the body; loaded with --handlers tests.support.handlers.ledger:registry):

    ledger     start, optional sleep (FAULTS_SLEEP_MS, a max: uniform 0..max), then the
               idempotent side effect, mark_done, done
    hold_pre   start, wait for gates/<id> (a kill or SIGSTOP lands here), then as ledger
    hold_post  as ledger up to the done line, then wait for gates/<id> before returning:
               the side effect is applied and recorded, the ack has not been sent
               (both holds run under the time limit: FAST's 1 s job_timeout cancels a
               hold that outlasts it and the retry policy starts it again, "after_failure";
               a test that holds across slower steps, a process's boot, passes a longer one)
    slow       start, sleep FAULTS_SLOW_S (default 2) under a 30 s per-handler time limit,
               then as ledger: a job slower than the claim threshold
    stubborn   start, then sleep and swallow every cancellation: only a kill ends it
    boom       start, then raise: a poison job that fails every time
    crash      start, then SIGKILL its own process: a poison job that kills workers
    exit_on    start; the job whose outbox_id is FAULTS_KILLER calls os._exit(1) (a
               worker-killing job in the middle of a stream), every other one as ledger
    abort_on   start; a job whose outbox_id is in FAULTS_ABORT (comma-separated) calls
               os.abort() (SIGABRT, as a renderer's failed assertion does), the rest as ledger
    flaky      start; the first run of a job in a process raises redis.TimeoutError (as
               a handler's own Redis call does on a loaded box), the next as ledger

The side effect is guarded by ctx.already_done / ctx.mark_done, as production handlers
are.  If the effect file already exists when a delivery tries to create it (a delivery
died between creating it and mark_done, or two deliveries raced past already_done),
the handler writes an "effect_exists" line: the invariants count those.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import redis

from stagedoor.handlers import Context, Registry
from stagedoor.stream.job import Job

ENV_DIR = "FAULTS_LEDGER_DIR"
registry = Registry()
_fds: dict[tuple[int, str], int] = {}
_failed_here: set[int] = set()  # outbox_ids whose last run in this process raised
_flaked: set[int] = set()       # flaky: outbox_ids that already failed once here

Handler = Callable[[Job, Context], Awaitable[None]]


def ledger_dir() -> Path:
    return Path(os.environ[ENV_DIR])


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One os.write of one line on an O_APPEND descriptor: atomic against other writers."""
    key = (os.getpid(), str(path))
    fd = _fds.get(key)
    if fd is None:
        fd = _fds[key] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = orjson.dumps(record) + b"\n"
    written = os.write(fd, line)
    assert written == len(line), "short write to the ledger"


def record(event: str, job: Job, **more: Any) -> None:
    append_line(ledger_dir() / "ledger.jsonl",
                {"event": event, "outbox_id": job.outbox_id, "pid": os.getpid(),
                 "kind": job.kind, "t": time.time(), **more})


def kind(name: str, timeout: float | None = None) -> Callable[[Handler], Handler]:
    """registry.register, with the run's start line written before the body runs
    ("after_failure" when this process's last run of the job raised) and a "failed" line
    for every run that raises (see the module docstring): the invariants then tell a
    retry from a second delivery."""
    def wrap(fn: Handler) -> Handler:
        @functools.wraps(fn)
        async def run(job: Job, ctx: Context) -> None:
            again = job.outbox_id in _failed_here
            _failed_here.discard(job.outbox_id)
            record("start", job, **({"after_failure": True} if again else {}))
            try:
                await fn(job, ctx)
            except BaseException as e:  # CancelledError too: a time limit, a shutdown
                _failed_here.add(job.outbox_id)
                record("failed", job, error=f"{type(e).__name__}: {e}")
                raise
        registry.register(name, timeout=timeout)(run)
        return run
    return wrap


async def wait_gate(job: Job) -> None:
    gate = ledger_dir() / "gates" / str(job.outbox_id)
    # The gate is a file another process creates: polling it is the only way to wait.
    while not gate.exists():  # noqa: ASYNC110
        await asyncio.sleep(0.005)


def _create_effect(job: Job) -> bool:
    effects = ledger_dir() / "effects"
    try:
        fd = os.open(effects / str(job.outbox_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    return True


async def apply_once(job: Job, ctx: Context) -> None:
    """The idempotent part every kind ends with: check, effect, mark, done line."""
    if await ctx.already_done(job):
        record("done", job, skipped=True)
        return
    if not _create_effect(job):
        record("effect_exists", job)
    await ctx.mark_done(job)
    record("done", job)


@kind("ledger")
async def ledger(job: Job, ctx: Context) -> None:
    sleep_ms = float(os.environ.get("FAULTS_SLEEP_MS", "0"))
    if sleep_ms:
        await asyncio.sleep(random.uniform(0, sleep_ms) / 1000)
    await apply_once(job, ctx)


@kind("hold_pre")
async def hold_pre(job: Job, ctx: Context) -> None:
    await wait_gate(job)
    await apply_once(job, ctx)


@kind("hold_post")
async def hold_post(job: Job, ctx: Context) -> None:
    await apply_once(job, ctx)
    await wait_gate(job)


@kind("slow", timeout=30.0)
async def slow(job: Job, ctx: Context) -> None:
    await asyncio.sleep(float(os.environ.get("FAULTS_SLOW_S", "2")))
    await apply_once(job, ctx)


@kind("stubborn", timeout=30.0)
async def stubborn(job: Job, ctx: Context) -> None:
    """Swallows every cancellation, as a handler stuck in a thread or hit by CPython's
    gh-86296 (a wait_for that eats a cancel) does: only a kill ends it."""
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue


@kind("boom")
async def boom(job: Job, ctx: Context) -> None:
    raise RuntimeError(f"boom {job.outbox_id}")


@kind("crash")
async def crash(job: Job, ctx: Context) -> None:
    os.kill(os.getpid(), signal.SIGKILL)
    await asyncio.sleep(10)  # not reached


@kind("exit_on")
async def exit_on(job: Job, ctx: Context) -> None:
    if str(job.outbox_id) == os.environ.get("FAULTS_KILLER"):
        os._exit(1)
    await apply_once(job, ctx)


@kind("abort_on")
async def abort_on(job: Job, ctx: Context) -> None:
    if str(job.outbox_id) in os.environ.get("FAULTS_ABORT", "").split(","):
        os.abort()
    await apply_once(job, ctx)


@kind("flaky")
async def flaky(job: Job, ctx: Context) -> None:
    if job.outbox_id not in _flaked:
        _flaked.add(job.outbox_id)
        raise redis.TimeoutError("Timeout reading from 127.0.0.1 (injected by the flaky kind)")
    await apply_once(job, ctx)
