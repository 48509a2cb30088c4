"""render_tickets' render in a process of its own (render_isolation = "process"): a
native abort in the renderer costs the order that caused it, not the worker.

    host = RenderHost(settings, stats, log)
    lost = await host.render_to(order_id, data, path)   # as LocalRender.render_to
    lost, tickets = await host.render(order_id, data, path)     # and the ticket count

The worker owns one render process (render_serve.py), started at the worker's boot
when render_tickets jobs are the next on its stream (start(): tickets.py's start hook,
so the first renders wait less for it), else by the first render (a worker that never
renders has none, and a no-op drain pays nothing); exec'd, not forked, so it shares
none of the worker's connections, threads or fonts.  A render is sent with its request id and
the order's JSON as the store holds it (render_serve.py's frames: a struct and bytes,
no pickle); the process parses and checks the order (the only parse of it: the worker
does not), renders and writes the PDF durably (the same C write as in the worker), and
the reply comes only after that: the job is acked after the reply, as before.  Several
renders are in flight at once on the process's native pool.

When the process dies (any signal or exit), every render in flight in it is
unresolved, and any one of them may have killed it.  A new process is started, and
those renders are run again one at a time, each alone (the others wait): one that
kills the process while alone is that order's error, RenderFailed "render aborted the
render process (SIGABRT)" (render_tickets dead-letters it at once), counted as
render_aborts and logged with the order id; the others complete as usual.  A render
that died alone of SIGKILL gets one more run alone (a kill -9 or the OOM killer may
have been someone else's doing), so no order costs more than three crashes.

A render that has not replied within render_timeout (20 s) is taken as hung: a native
loop that never ends would hold one of the process's threads for good, and each retry of
its job another, until no render of the worker could run.  The process is killed
(SIGKILL) and its renders are run again one at a time, as after a crash; the one that
does not reply within render_timeout while alone (or that was alone when it was found
hung) is that order's error, RenderFailed "render hung: no result in 20s
(render_timeout)", counted as render_hangs and logged with the order id; renders of the
same order that wait behind it fail with it (the same order renders the same way).

A process found so while it was not running says nothing about its renders
(runstate.py): stopped (SIGSTOP, a debugger: state T), frozen by a cgroup freezer
(`docker pause`, systemd freezing a unit: no T state, the cgroup says it), or that used
no CPU time at all since the render was sent (a freeze just lifted, a suspended host;
also a render blocked in a system call in an otherwise idle process, see runstate.py
for why that side is right).  It is killed and replaced as above, but the render alone
in it is run alone again in the fresh process, not blamed (after render_rules.STALLS
such stalls it fails as TransientError, retried by the worker's policy, not
dead-lettered as hung).
A process frozen by a cgroup v1 freezer cannot die of its SIGKILL before it is thawed:
after KILL_WAIT our end of its socket is aborted (nothing of it is read any more) and
the next process starts; the frozen one dies of the pending SIGKILL when thawed.
The worker's own lateness is no render's either: when the watch's tick comes more than
render_rules.LOOP_LATE late (the worker itself was stopped, frozen or starved), every
render in flight gets its render_timeout again from then.

A render whose caller was cancelled (the job's time limit, the worker's stop) is
dropped if it was not sent yet (waiting, or a suspect); one already in a process may
still write its PDF, and `landed_late(order_id, path)` (tickets.py: the order's state
read, the PDF removed if it was refunded meanwhile) runs when it does, or at once when
its reply came before the cancelled caller could resume (the PDF is written, and the
caller will not mark it).

Log lines about one render carry its own job's fields (taken where render_to was
called); the task that manages the process runs in no job's context, so lines about
the process itself carry none.

A process that dies before it is ready is restarted with a backoff (0.1 s doubling to
5 s); after three such starts in a row the renders waiting for it fail as
TransientError ("render process cannot start: ..."), retried by the worker's policy,
not lost; the next render tries again once the backoff has passed.

close() (the worker's stop, after its jobs ended) shuts down the worker's writing side
of the socket: the process finishes what it has, replies and exits, and the replies
are read until it does (within STOP_TIMEOUT), so the renders of cancelled jobs still
in it get their landed_late check before the worker exits.  If the worker is killed,
the process sees the socket close, and the kernel kills it (PR_SET_PDEATHSIG) in any
case.

The rules above (backoff, verdicts, hangs, stalls, the watch's lateness) are stated once
in render_rules.py, as plain functions; this module does the OS and asyncio work.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import itertools
import logging
import os
import pickle
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from ..backoff import Backoff
from ..config import Settings
from ..errors import StagedoorError, TransientError
from ..render import fonts
from ..render.order import OrderDataError, RenderFailed
from ..telemetry.logs import current_job
from ..telemetry.metrics import WorkerStats
from . import render_rules as rules
from .render_pool import LateChecks
from .render_serve import Frames, Outbox, frame, parse_reply, request_frame
from .runstate import cpu_ticks, not_running

log = logging.getLogger("stagedoor.render_host")

READY_TIMEOUT = 30.0    # s from exec to "ready" (imports, fonts, a warm-up render)
STOP_TIMEOUT = 10.0     # s a closing worker waits for its render process to exit
KILL_WAIT = 5.0         # s a SIGKILLed render process may take to go before it is left to die
# the module the render process runs (a test runs a faulty one instead:
# tests/support/handlers/faulty_render.py)
SERVE_MODULE = "stagedoor.tickets.render_serve"
_ROOT = str(Path(__file__).resolve().parents[2])  # where this stagedoor is: the process's too


class _StartFailed(StagedoorError):
    pass


@dataclasses.dataclass(eq=False)
class _Render:
    rid: int
    order_id: int
    frame: bytes
    # settled with (outcome, detail, lost, tickets), never with an exception: the job
    # may have been cancelled (its time limit) and nobody would retrieve one
    replied: asyncio.Future[tuple[str, Any, dict[str, int], int]]
    path: Path
    job: Mapping[str, Any] | None     # the log fields of the job that asked for it
    alone_kills: int = 0    # times the process died of SIGKILL while this ran alone
    stalls: int = 0         # times its process was found not running while this ran alone
    sent: float = 0.0       # when it was last written to a process (time.monotonic)
    abandoned: bool = False  # its caller was cancelled (the job's time limit): not sent
    #                          any more; if it was, landed_late checks what it wrote


async def _reap_spawned(spawn: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """The process an exec whose caller was cancelled started, if it did: killed and
    waited for (the caller's cancellation was delivered: these awaits run)."""
    try:
        proc = await spawn
    except Exception:   # the exec failed: nothing started
        return
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()


def _about(req: _Render, **more: Any) -> dict[str, Any]:
    """The log fields of a line about this render: its own job's (the manage task runs
    in no job's context), and its order."""
    return {**(req.job or {}), "order_id": req.order_id, **more}


class RenderHost:
    def __init__(self, settings: Settings, stats: WorkerStats,
                 on_log: logging.Logger | None = None,
                 landed_late: Callable[[int, Path], Coroutine[Any, Any, None]] | None = None
                 ) -> None:
        """`landed_late(order_id, path)`: run (in a task, in the render's job's log
        context) when a render whose caller was cancelled wrote its PDF after all."""
        self._late = LateChecks(landed_late)
        self._dying: set[asyncio.Future[int]] = set()  # killed, not dead yet (v1-frozen)
        self._threads = settings.render_threads
        self._hang_after = settings.render_timeout
        self._stats = stats
        self._log = on_log or log
        self._ids = itertools.count(1)
        self._waiting: deque[_Render] = deque()     # not sent yet
        self._suspects: deque[_Render] = deque()    # in flight when a process died
        self._inflight: dict[int, _Render] = {}
        self._wake = asyncio.Event()
        self._out: Outbox | None = None          # while renders may go out directly
        self._link: asyncio.Transport | None = None   # the socket, from the start on
        self._frames: Frames | None = None    # its replies, once the process is ready
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._early = False     # start() asked for a process before any render
        self._prepare: Callable[[], object] | None = None   # start()'s, run after the exec
        # a start attempt ended, ready or failed (started(): the worker's boot waits on it)
        self._tried = asyncio.Event()
        self._missing_before = 0    # replacement marks counted by processes now gone
        self._missing_now = 0
        self.pid: int | None = None     # the render process, while one is up
        self.started_early = False      # start() started one before any render
        self.starts = 0

    # -- the worker's side ---------------------------------------------------------------

    def _manage_soon(self) -> None:
        if self._task is None or self._task.done():
            # in no job's context: its lines about the process are no job's (issue 37)
            self._task = asyncio.create_task(self._manage(), name="render-host",
                                             context=contextvars.Context())
        self._wake.set()

    def start(self, prepare: Callable[[], object] | None = None) -> None:
        """Start the process now, in the background, if none is up: the worker's boot
        calls this when render_tickets jobs are next on the stream (tickets.py), so the
        first renders need not wait for the start.  One attempt: if it fails, the first
        render starts it as usual.  `prepare()` runs once the process is exec'd and
        before its first frame (the worker's font plan, which that frame carries: made
        while the process imports, not before the exec); if it raises, the start fails
        with its error."""
        if not self._closing and self._proc is None:
            self._early = self.started_early = True
            self._prepare = prepare
            self._manage_soon()

    async def started(self, within: float) -> bool:
        """After start(): wait until its process is ready (True), or its start failed,
        the host closed, or `within` seconds passed (False: renders then wait for the
        process, or fail, as without start()).  The worker's boot waits here
        (tickets.handlers.wait_for_render_process) so that it reads no job it cannot
        render yet."""
        if self._out is not None:
            return True
        if self._closing or (self._task is None or self._task.done()):
            return False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._tried.wait()
        return self._out is not None

    async def render_to(self, order_id: int, data: bytes, path: Path) -> dict[str, int]:
        """Render the order stored under `order_id` (its JSON, as stored: the process
        parses and checks it) to `path` in the render process: what
        LocalRender.render_to does and returns, there.  OrderDataError when the JSON is
        no order of that id."""
        lost, _tickets = await self.render(order_id, data, path)
        return lost

    async def render(self, order_id: int, data: bytes, path: Path
                     ) -> tuple[dict[str, int], int]:
        """render_to, and the order's ticket count (the caller has not parsed it)."""
        if self._closing:
            raise RuntimeError("the render process is closed")
        loop = asyncio.get_running_loop()
        rid = next(self._ids)
        req = _Render(rid, order_id, request_frame(rid, order_id, os.fsencode(path.parent),
                                                   os.fsencode(path.name), data),
                      loop.create_future(), path, current_job())
        if self._out is not None and not self._suspects:
            self._send(req)
        else:
            self._waiting.append(req)
            self._manage_soon()
        try:
            outcome, detail, lost, tickets = await asyncio.shield(req.replied)
        except asyncio.CancelledError:
            if req.replied.done():
                # the reply came, but the cancellation (the job's time limit) struck
                # before this resumed: the PDF is written and nobody will mark it, as
                # for a reply that comes after the cancellation (_on_reply)
                if req.replied.result()[0] == "ok":
                    self.check_late(req.order_id, req.path, req.job)
            else:
                self._abandon(req)
            raise
        if outcome == "ok":
            return lost, tickets
        if outcome == "failed":
            raise RenderFailed(detail)
        if outcome == "data":
            raise OrderDataError(detail)
        if outcome == "oserror":
            raise OSError(*detail)
        if outcome == "memory":
            raise MemoryError("out of memory in the render process")
        raise TransientError(detail)    # "transient": no render process could start

    @property
    def missing_glyphs(self) -> int:
        """Replacement marks drawn by this worker's render processes so far."""
        return self._missing_before + self._missing_now

    async def close(self) -> None:
        """EOF to the process: it finishes what it has, replies and exits (killed after
        STOP_TIMEOUT).  The worker calls this after its jobs ended, but renders of
        cancelled jobs may still be in the process: only our writing side is shut
        down, and their replies are read (and their landed-late checks run) until
        the process closes its end, within STOP_TIMEOUT.  Closing the socket lost
        them, and the PDF of an order refunded meanwhile stayed until the job's
        redelivery (claim_idle_ms)."""
        self._closing = True
        deadline = asyncio.get_running_loop().time() + STOP_TIMEOUT
        frames, link = self._frames, self._link
        if frames is not None and link is not None and not frames.closed.done():
            with contextlib.suppress(ConnectionError, RuntimeError):
                link.write_eof()    # after what is still buffered; RuntimeError: closing
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    await asyncio.shield(frames.closed)     # _on_reply settles them
        if self._task is not None:     # no render of a job is in flight: they ended
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._link is not None:
            with contextlib.suppress(ConnectionError):
                self._link.close()
        proc = self._proc
        if proc is not None:
            try:
                async with asyncio.timeout_at(deadline):
                    await proc.wait()
            except TimeoutError:
                self._log.error("render process %d did not exit within %gs of the "
                                "worker's stop; killing it", proc.pid, STOP_TIMEOUT)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        for req in [*self._waiting, *self._suspects, *self._inflight.values()]:
            self._fail(req, "transient", "the worker is stopping")
        for waited in list(self._dying):    # still frozen: it dies when thawed, unreaped
            waited.cancel()
        await self._late.wait()     # the checks of renders that landed late finish

    # -- the process's life --------------------------------------------------------------

    def _send(self, req: _Render) -> None:
        assert self._out is not None
        req.sent = time.monotonic()
        self._inflight[req.rid] = req     # in the order sent: the first is the oldest
        self._out.put(req.frame)

    def _abandon(self, req: _Render) -> None:
        """Its job was cancelled (its time limit, the worker's stop): a render not sent
        yet never is; one in a process may still write, and landed_late then checks the
        order (issue 37: a refund that ran meanwhile found nothing to cancel)."""
        req.abandoned = True
        if self._inflight.get(req.rid) is req:
            return  # in a process: its reply settles it (a render run alone is waited for)
        for queue in (self._waiting, self._suspects):
            with contextlib.suppress(ValueError):
                queue.remove(req)
        self._fail(req, "transient", "cancelled")

    def check_late(self, order_id: int, path: Path,
                   job: Mapping[str, Any] | None = None) -> None:
        """landed_late(order_id, path) in a task, in `job`'s log context (the current
        job's by default), for a PDF written that no job will mark: a render that wrote
        while its caller was cancelled; close() waits for it.  Nothing without
        landed_late."""
        self._late.check(order_id, path, job)

    @staticmethod
    def _fail(req: _Render, outcome: str, why: str) -> None:
        if not req.replied.done():
            req.replied.set_result((outcome, why, {}, 0))

    async def _manage(self) -> None:
        """Start a process when renders wait, serve it until it dies, and again.  A bug
        here fails the renders waiting (transient) rather than leaving them hanging."""
        backoff = Backoff(rules.START)
        failed_starts = 0
        while not self._closing:
            if not self._waiting and not self._suspects and not self._early:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._early = False
            try:
                frames = await self._start()
            except _StartFailed as e:
                self._tried.set()
                failed_starts += 1
                delay = backoff.next()
                if rules.gives_up_starting(failed_starts):
                    self._log.error("render process cannot start (%s), %d times in a "
                                    "row: failing the %d renders waiting for it as "
                                    "transient errors; next start in %.1fs", e,
                                    failed_starts, len(self._waiting) + len(self._suspects),
                                    delay)
                    self._fail_waiting(f"render process cannot start: {e}")
                else:
                    self._log.warning("render process failed to start (%s); again in "
                                      "%.1fs", e, delay)
                await asyncio.sleep(delay)
                continue
            except Exception as e:
                self._tried.set()
                self._log.exception("starting the render process failed")
                self._fail_waiting(f"render process: {type(e).__name__}: {e}")
                await asyncio.sleep(backoff.next())
                continue
            self._tried.set()
            failed_starts = 0
            started = time.monotonic()
            explained = await self._serve(frames)
            if rules.backoff_starts_over(explained, time.monotonic() - started):
                backoff.reset()     # a verdict, or a process that had worked a while
            else:
                await asyncio.sleep(backoff.next())

    def _fail_waiting(self, why: str) -> None:
        while self._waiting or self._suspects:
            self._fail((self._waiting or self._suspects).popleft(), "transient", why)

    async def _start(self) -> Frames:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # no STAGEDOOR_* setting (a Redis URL may carry a password): the process gets
        # its render settings in its first frame and never talks to Redis
        env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if _ROOT not in paths and Path(_ROOT).name not in ("site-packages", "dist-packages"):
            # a source tree: this one, in the process too (an installed package is found
            # as usual; its directory first on PYTHONPATH would shadow the stdlib)
            env["PYTHONPATH"] = os.pathsep.join([_ROOT, *paths])
        # shielded: cancelled mid-exec (a worker stopping during an early start), asyncio
        # kills what it started but does not wait for it, and the process ran on until
        # its imports were over and it saw EOF; here it is killed and reaped first
        spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
            sys.executable, "-m", SERVE_MODULE,
            str(theirs.fileno()), str(os.getpid()), pass_fds=(theirs.fileno(),),
            stdin=asyncio.subprocess.DEVNULL, env=env))
        try:
            proc = await asyncio.shield(spawn)
        except OSError as e:
            ours.close()
            raise _StartFailed(f"exec failed: {e}") from e
        except BaseException:   # cancelled
            ours.close()
            await _reap_spawned(spawn)
            raise
        finally:
            theirs.close()
        self._proc, self.pid = proc, proc.pid
        self.starts += 1
        loop = asyncio.get_running_loop()
        first: asyncio.Future[bytes] = loop.create_future()

        def handshake(body: bytes) -> None:
            if not first.done():
                first.set_result(body)

        frames = Frames(handshake)
        try:
            transport, _ = await loop.create_unix_connection(lambda: frames, sock=ours)
        except BaseException:   # cancelled (a worker stopping during an early start)
            ours.close()        # the process sees EOF before its handshake and exits
            raise
        self._link = transport
        prepare, self._prepare = self._prepare, None
        if prepare is not None:
            try:
                prepare()
            except Exception as e:
                await self._abandon_start(proc, transport)
                raise _StartFailed(f"{type(e).__name__}: {e}") from e
        # the font plan the worker made of its settings at its start
        # (lifecycle.warn_at_start, or tickets.start_render_process's prepare just now):
        # the process need not read every font's cmap again
        transport.write(frame((self._threads, fonts.current())))
        either: list[asyncio.Future[Any]] = [first, frames.closed]
        await asyncio.wait(either, timeout=READY_TIMEOUT,
                           return_when=asyncio.FIRST_COMPLETED)
        if not first.done():
            rc = await self._abandon_start(proc, transport)
            raise _StartFailed(f"it died before it was ready ({rules.death(rc)})"
                               if frames.closed.done() else
                               f"not ready after {READY_TIMEOUT:g}s")
        ready = pickle.loads(first.result())
        assert ready[0] == "ready", ready
        frames.on_frame = self._on_reply
        self._frames = frames
        if self.starts > 1:
            self._log.info("render process %d started (start %d)", proc.pid, self.starts)
        return frames

    async def _abandon_start(self, proc: asyncio.subprocess.Process,
                             transport: asyncio.Transport) -> int:
        """A start that will not be: its process killed and reaped, the socket closed,
        nothing of it kept; its exit status."""
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        rc = await proc.wait()
        transport.close()
        self._proc = self._link = self.pid = None
        return rc

    async def _serve(self, frames: Frames) -> bool:
        """Send the renders, settle them from the replies; when the process dies, the
        renders it had become suspects, run alone by the next process.  True when its
        death was explained (a render that killed it alone)."""
        replies = frames.closed     # the replies are settled as they come (_on_reply)
        transport = frames.transport
        assert transport is not None
        hung: _Render | None = None
        stalled: str | None = None
        try:
            while self._suspects:   # nothing goes out directly while suspects run alone
                req = self._suspects.popleft()
                if req.abandoned:   # its job was cancelled while it was in flight
                    self._fail(req, "transient", "cancelled")
                if req.replied.done():      # failed with its order, or abandoned
                    continue
                transport.write(req.frame)
                req.sent = time.monotonic()
                self._inflight[req.rid] = req
                alone, why = await self._watch(replies, req)
                if alone is not None:   # no reply while alone: it hangs, or a stall
                    if why is not None:
                        return await self._stalled_alone(req, why)
                    return await self._hung_alone(req)
                if not req.replied.done():  # the process died with this render alone in it
                    return await self._died_alone(req, await self._reap())
            self._out = Outbox(transport)
            while self._waiting:
                req = self._waiting.popleft()
                if not req.replied.done():
                    self._send(req)
            hung, stalled = await self._watch(replies)  # until it dies, is closed, or hangs
        finally:
            self._out = None
            frames.on_frame = _ignore     # no reply of this process counts any more
        if self._closing:
            return False
        lost = [r for r in self._inflight.values() if not r.replied.done()]
        if hung is not None and rules.judged(lost, hung):   # it was alone: a verdict
            if stalled:     # unless the process was not running: no verdict on a stall
                return await self._stalled_alone(hung, stalled)
            return await self._hung_alone(hung)
        how = await self._reap()
        self._inflight.clear()
        self._suspects.extend(lost)
        self._stats.inc("render_deaths")
        if hung is not None:
            self._log.error("render process killed: order %d had no result in %gs "
                            "(render_timeout)%s, with %d renders in flight; running them "
                            "again one at a time to find the one that hangs", hung.order_id,
                            self._hang_after, f" and the process was not running ({stalled})"
                            if stalled else "", len(lost),
                            extra=_about(hung, order_ids=[r.order_id for r in lost][:20]))
            return False
        if not lost:
            self._log.error("render process died (%s) with no render in it; the next "
                            "render starts another", how)
            return False
        self._log.error("render process died (%s) with %d renders in flight; running "
                        "them again one at a time to find the one that did it", how, len(lost),
                        extra={"order_ids": [r.order_id for r in lost][:20]})
        return False

    async def _died_alone(self, req: _Render, how: str) -> bool:
        self._inflight.clear()
        self._stats.inc("render_deaths")
        if rules.died_alone(how, req.alone_kills) is rules.Next.AGAIN:
            req.alone_kills += 1
            self._suspects.appendleft(req)
            self._log.warning("render process killed (SIGKILL) while rendering order %d "
                              "alone; running it alone once more", req.order_id,
                              extra=_about(req))
            return False
        self._stats.inc("render_aborts", "render_tickets")
        self._log.error("order %d: render aborted the render process (%s); the job is "
                        "dead-lettered", req.order_id, how, extra=_about(req))
        self._fail(req, "failed", f"render aborted the render process ({how})")
        return True

    async def _watch(self, replies: asyncio.Future[None], alone: _Render | None = None
                     ) -> tuple[_Render | None, str | None]:
        """Wait until the process dies or is closed (or `alone`, the one render in it,
        has its reply); if the oldest render in it has had no reply for render_timeout,
        kill the process and return that render, and why the process was not running
        then (runstate.not_running), None when it was: a hang (_kill_hung)."""
        every = rules.watch_tick(self._hang_after)
        pid = self.pid
        waits: list[asyncio.Future[Any]] = [replies] if alone is None else [replies,
                                                                           alone.replied]
        # (when, the process's CPU ticks then), from the tick after the oldest was sent
        ticks: deque[tuple[float, int | None]] = deque()
        last = time.monotonic()
        while True:
            done, _ = await asyncio.wait(waits, timeout=every,
                                         return_when=asyncio.FIRST_COMPLETED)
            if done:
                return None, None
            now = time.monotonic()
            late = rules.watch_lateness(now - last, every)
            if late:
                # this loop did not run (the worker stopped, frozen or starved): the
                # renders' time without a reply may be its own, so none is charged
                self._log.warning("the render watch ran %.1fs late (the worker was not "
                                  "running); the %d renders in flight get render_timeout "
                                  "again", late, len(self._inflight))
                for req in self._inflight.values():
                    req.sent = max(req.sent, now)
                ticks.clear()
            last = now
            oldest = next(iter(self._inflight.values()), None)
            while ticks and (oldest is None or ticks[0][0] < oldest.sent):
                ticks.popleft()     # from before the oldest render in flight was sent
            ticks.append((now, cpu_ticks(pid) if pid is not None else None))
            if oldest is not None and rules.overdue(now, oldest.sent, self._hang_after):
                return oldest, await self._kill_hung(oldest, replies, ticks[0][1])

    async def _kill_hung(self, req: _Render, replies: asyncio.Future[None],
                         ticks_before: int | None) -> str | None:
        """SIGKILL the process (a hung render ignores anything gentler) and wait until its
        end of the socket is closed: no reply of it can come after this.  Returns why the
        process was not running (stopped, frozen, or idle: no CPU time since
        `ticks_before`), a stall which says nothing about the render (issue 37); None
        when it was running: a hang."""
        proc = self._proc
        why = not_running(proc.pid, ticks_before) if proc is not None else None
        self._log.warning("order %d: render has no result after %gs (render_timeout)%s; "
                          "killing render process %s", req.order_id, self._hang_after,
                          f", but the process is not running ({why}), not hung" if why
                          else "", proc.pid if proc is not None else "?",
                          extra=_about(req))
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        done, _ = await asyncio.wait([replies], timeout=KILL_WAIT)
        if not done and self._link is not None:
            # A process frozen by a cgroup v1 freezer dies of SIGKILL only once thawed
            # (a v2 freeze lets it die).  Abort our end of its socket: nothing of it is
            # read from now on, and the next process is not kept waiting for the thaw
            # (it dies of the pending SIGKILL before it runs another instruction).
            self._log.error("render process %s has not died %gs after SIGKILL (frozen by "
                            "a cgroup v1 freezer?): nothing of it is read any more, and it "
                            "dies once thawed", proc.pid if proc is not None else "?",
                            KILL_WAIT)
            self._link.abort()
            await asyncio.wait([replies])
        return why

    async def _stalled_alone(self, req: _Render, why: str) -> bool:
        """The process was killed with only `req` in it, not running (`why`: stopped,
        frozen, idle) rather than rendering: no verdict.  The render runs alone again in
        a fresh process; after rules.STALLS such stalls it fails as transient (retried by the
        worker's policy, not dead-lettered as hung)."""
        await self._reap()
        self._inflight.clear()
        self._stats.inc("render_deaths")
        req.stalls += 1
        if rules.stalled_alone(req.stalls) is rules.Next.TRANSIENT:
            self._log.error("order %d: the render process was not running (%s) each "
                            "of %d times it rendered it alone; failing the render as "
                            "transient", req.order_id, why, req.stalls, extra=_about(req))
            self._fail(req, "transient", f"render process not running ({why}) "
                                         f"{req.stalls} times while rendering this order")
            return False
        self._suspects.appendleft(req)
        self._log.warning("order %d: the render process was not running (%s), not hung; "
                          "running the render alone again in a fresh process", req.order_id,
                          why, extra=_about(req))
        return False

    async def _hung_alone(self, req: _Render) -> bool:
        """The process was killed with only `req` in it, which had no reply within
        render_timeout: that order's verdict (and of any render of it waiting)."""
        await self._reap()
        self._inflight.clear()
        self._stats.inc("render_deaths")
        self._stats.inc("render_hangs", "render_tickets")
        why = f"render hung: no result in {self._hang_after:g}s (render_timeout)"
        self._log.error("order %d: %s; the render process was killed and the job is "
                        "dead-lettered", req.order_id, why, extra=_about(req))
        self._fail(req, "failed", why)
        for queue in (self._suspects, self._waiting):
            same = [r for r in queue if r.order_id == req.order_id]
            for r in same:
                queue.remove(r)
                self._fail(r, "failed", why)
        return True

    async def _reap(self) -> str:
        proc, self._proc, self.pid = self._proc, None, None
        link, self._link, self._frames = self._link, None, None
        assert proc is not None
        if link is not None:    # our end of the dead process's socket (else a fd each death)
            link.close()
        self._missing_before += self._missing_now
        self._missing_now = 0
        waited = asyncio.ensure_future(proc.wait())
        done, _ = await asyncio.wait([waited], timeout=KILL_WAIT)
        if not done:    # killed, not dead (_kill_hung): reaped when it goes, not waited for
            self._dying.add(waited)
            waited.add_done_callback(self._dying.discard)
            return "SIGKILL, not dead yet"
        return rules.death(waited.result())

    def _on_reply(self, body: bytes) -> None:
        rid, outcome, detail, missing, lost, tickets = parse_reply(body)
        self._missing_now = max(self._missing_now, missing)
        req = self._inflight.pop(rid, None)
        if req is None:
            return
        if req.abandoned:
            self._fail(req, outcome, "cancelled")
            if outcome == "ok":
                self.check_late(req.order_id, req.path, req.job)
            return
        if not req.replied.done():
            req.replied.set_result((outcome, detail, lost, tickets))


def _ignore(body: bytes) -> None:
    pass
