"""What runs in a worker process after the supervisor forked it.

    reset signals      the supervisor's handlers and wakeup fd are not ours
    environment        no NOTIFY_SOCKET / WATCHDOG_*: only the supervisor talks to systemd
    logging            our own handler on the inherited stderr (the journal under systemd)
    faulthandler       SIGABRT dumps every thread's stack to stderr, then the process dies
    import + registry  here, not in the supervisor, so a SIGHUP picks up new handler code
                       and a bad handler module is this child's ConfigError (exit 78)
    uvloop.run         the Worker, a heartbeat task and the lifeline reader

Exit codes (the supervisor tells boot failures apart by them):
    0   stopped on request (SIGTERM, or the supervisor vanished)
    70  also: the supervisor vanished and the drain outlived graceful_timeout plus the
        acks' share (orphan_deadline), so the worker ended itself
    69  BootError: Redis unreachable for boot_timeout (EX_UNAVAILABLE)
    78  ConfigError, a Redis server that is too old, an ACL that refuses one of our
        commands (NOPERM), the worker's extension not built (worker/entries.py,
        NativeMissing), or render_tickets without its native renderer and without
        render_fallback = "reference" (EX_CONFIG)
    70  anything else (EX_SOFTWARE), with the traceback on stderr

Why faulthandler.enable and not register(SIGABRT): CPython refuses to register()
the fatal signals (SIGABRT included: "use enable() instead").  enable() installs
the fatal-signal handler, which dumps all threads and then re-raises SIGABRT with
the default action, so a hung worker leaves its stacks in the log and dies.  The
core dump that would follow is switched off (RLIMIT_CORE soft limit 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import mmap
import os
import resource
import signal
import sys
import threading
import time
from typing import Any

import orjson
import redis

from ..config import ConfigError, Settings
from ..exitcodes import EX_CONFIG, EX_OK, EX_SOFTWARE, EX_UNAVAILABLE
from ..proctitle import set_title, worker_title
from ..telemetry import logs as telemetry_logs
from .family import ProcessFamily

log = logging.getLogger("stagedoor.worker_process")

QUEUE_STATUS_EVERY = 5.0  # seconds between queue status reports from slot 0
NUDGE_AFTER = 1.0   # a stopping worker's loops still alive this long after the stop ...
NUDGE_EVERY = 0.25  # ... are re-cancelled this often, if a cancel was swallowed (nudge)
# SIGPIPE is not among them: CPython ignores it so that a write to a closed socket or
# pipe raises EPIPE; with the default action a Redis reset or a dead supervisor's
# heartbeat pipe would kill the worker instead of letting it drain.
_RESET_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGTTIN", "SIGTTOU", "SIGCHLD", "SIGUSR1",
                  "SIGUSR2", "SIGQUIT")


def reset_signals() -> None:
    """Default dispositions, no wakeup fd; SIGINT ignored (a terminal's ^C goes to the
    whole process group, and shutting the workers down is the supervisor's job)."""
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    for name in _RESET_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM stays blocked until the event loop's stop handler is in (_amain): one sent
    # while the worker boots waits for it (supervisor/process.py), not the default action.
    signal.pthread_sigmask(signal.SIG_SETMASK, {signal.SIGTERM})


def setup_logging(settings: Settings) -> None:
    telemetry_logs.setup_logging(settings.log_format, settings.log_level, stream=sys.stderr)


def child_main(settings: Settings, slot: int, heartbeat_fd: int, lifeline_fd: int,
               killer: tuple[str, str] | None = None, page: mmap.mmap | None = None, *,
               hold: bool = False) -> int:
    """The whole life of a worker process; returns its exit code.

    killer: (entry id, cause) of the entry that killed the slot's previous worker while
    it ran alone (redelivery.py): this worker dead-letters it at boot.  page: the
    page shared with the supervisor for the counters (telemetry/shared_counts.py).
    hold: another process of this consumer name is still alive; boot and report READY,
    but read nothing before the supervisor writes "g" down the lifeline."""
    set_title(worker_title(settings, slot))
    reset_signals()
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        os.environ.pop(name, None)
    setup_logging(settings)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    with contextlib.suppress(ValueError, OSError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    try:
        # after the fork: the supervisor imports this module (pool.py) and must not load
        # the worker's (uvloop, the handlers, lifecycle, loop, inspect: docs/benchmarks.md)
        import uvloop

        from ..handlers import load_registry
        from ..stream.connection import ServerTooOld
        from .lifecycle import BootError
        registry = load_registry(settings.handlers)
    except ConfigError as e:
        log.error("worker slot %d: config error: %s", slot, e)
        return EX_CONFIG
    except ImportError as e:  # entries.NativeMissing: the worker's extension is not built
        log.error("worker slot %d: %s", slot, e)
        return EX_CONFIG
    try:
        uvloop.run(_amain(settings, registry, slot, heartbeat_fd, lifeline_fd, killer,
                          page, hold))
    except ConfigError as e:
        log.error("worker slot %d: config error: %s", slot, e)
        return EX_CONFIG
    except ServerTooOld as e:
        log.error("worker slot %d: %s", slot, e)
        return EX_CONFIG
    except BootError as e:
        log.error("worker slot %d: %s", slot, e)
        return EX_UNAVAILABLE
    except redis.ResponseError as e:
        # the ACL user lacks a command: a config error (redis-py strips the NOPERM
        # prefix of the errors it maps; stagedoor.stream.resp keeps it)
        if isinstance(e, redis.exceptions.NoPermissionError) or str(e).startswith("NOPERM"):
            log.error("worker slot %d: Redis refused a command: %s", slot, e)
            return EX_CONFIG
        log.exception("worker slot %d crashed", slot)
        return EX_SOFTWARE
    except Exception:
        log.exception("worker slot %d crashed", slot)
        return EX_SOFTWARE
    return EX_OK


def orphan_deadline(settings: Settings, slot: int) -> threading.Timer:
    """Exit by force if the drain outlives the time the supervisor would have given it.

    Under a supervisor, graceful_timeout is enforced by its SIGKILL; once it is gone
    (kill -9, OOM killer) nobody would, and a drain that cannot end (a handler that
    swallows its cancel, a thread stuck on a disk, Redis gone as well) would leave the
    worker at PPID 1 for good.  The timer is a daemon thread, not a loop callback, so
    that a loop blocked by a handler's synchronous code cannot hold it off.  Whatever
    was in flight stays pending and is reclaimed by the other workers."""
    after = settings.graceful_timeout + max(1.0, settings.graceful_timeout) + 1.0

    def exit_now() -> None:
        log.error("worker slot %d: still draining %gs after its supervisor vanished; "
                  "exiting now, its unfinished jobs stay pending for other workers",
                  slot, after)
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(EX_SOFTWARE)

    timer = threading.Timer(after, exit_now)
    timer.daemon = True
    timer.start()
    return timer


class Heartbeat:
    """Writes one JSON line per message to the heartbeat pipe, never blocking the loop."""

    MAX_BUFFER = 1 << 20  # a supervisor that stopped reading gets no more than this

    def __init__(self, transport: asyncio.WriteTransport, slot: int) -> None:
        self.transport = transport
        self.slot = slot
        self.pid = os.getpid()
        self.queue: dict[str, Any] | None = None
        self.asked = asyncio.Event()  # the supervisor wants fresh queue numbers (a scrape)
        self._family = ProcessFamily(self.pid)     # with the render process (family.py)

    def send(self, message: dict[str, Any]) -> None:
        if self.transport.is_closing():
            return
        if self.transport.get_write_buffer_size() > self.MAX_BUFFER:
            return
        self.transport.write(orjson.dumps(message) + b"\n")

    def ready(self) -> None:
        self.send({"t": "ready", "pid": self.pid, "slot": self.slot})

    async def alone(self, entry_id: bytes | None, worker: Any) -> None:
        """Tell the supervisor which entry runs alone now (None: it settled), with the
        counters so far: if it kills the process, the supervisor knows what did, and
        loses no count.  The line is on the pipe before the handler starts (the
        supervisor reads every line of a dead worker before it reaps it)."""
        self.send({"t": "alone", "id": None if entry_id is None else entry_id.decode(),
                   "stats": worker.stats.snapshot()})
        if entry_id is None:
            return
        for _ in range(1000):  # a supervisor that stopped reading: at most a second
            if self.transport.is_closing() or not self.transport.get_write_buffer_size():
                return
            await asyncio.sleep(0.001)

    def beat(self, worker: Any) -> None:
        message: dict[str, Any] = {
            "t": "hb", "pid": self.pid, "slot": self.slot, "ready": worker.ready.is_set(),
            "stats": worker.stats.snapshot(), "rss": self._family.rss(),
        }
        if self.queue is not None:
            message["queue"], self.queue = self.queue, None
        self.send(message)

    async def run(self, worker: Any, interval: float) -> None:
        while True:
            self.beat(worker)
            await asyncio.sleep(interval)

    async def queue_status(self, worker: Any, settings: Settings) -> None:
        """Slot 0 only: the queue's numbers for the exporter, every few seconds, and at
        once when the supervisor asks (a scrape waits for them, up to half a second).

        Each round first counts jobs trimmed before any worker read them (the audit
        of stagedoor.stream.backlog), so a loss by another producer or an XTRIM is
        logged once and never goes unnoticed."""
        # the worker's modules, after the fork (child_main says why)
        from ..stream.backlog import audit
        from ..telemetry.inspect import aqueue_status

        await worker.ready.wait()
        every = max(QUEUE_STATUS_EVERY, settings.heartbeat_interval)
        while True:
            started = time.monotonic()
            asked = self.asked.is_set()
            self.asked.clear()
            try:
                await audit(worker.cmd, settings)
            except Exception as e:  # Redis away or full (OOM refuses the script's writes)
                log.debug("trimmed-entries audit failed: %s", e)
            try:
                self.queue = await aqueue_status(worker.cmd, settings)
            except Exception as e:  # Redis away for a moment, or an odd key: not fatal
                log.debug("queue status failed: %s", e)
            if asked and self.queue is not None:
                self.beat(worker)  # now, not at the next heartbeat: a scrape is waiting
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.asked.wait(),
                                       max(0.0, every - (time.monotonic() - started)))


class _PipeProtocol(asyncio.BaseProtocol):
    def connection_lost(self, exc: Exception | None) -> None:
        pass


async def _amain(settings: Settings, registry: Any, slot: int, heartbeat_fd: int,
                 lifeline_fd: int, killer: tuple[str, str] | None = None,
                 page: mmap.mmap | None = None, hold: bool = False) -> None:
    # the worker's modules, after the fork (child_main says why)
    from . import lifecycle
    from .loop import Worker

    loop = asyncio.get_running_loop()
    pipe = os.fdopen(heartbeat_fd, "wb", buffering=0)
    transport, _ = await loop.connect_write_pipe(_PipeProtocol, pipe)
    heartbeat = Heartbeat(transport, slot)
    go = asyncio.Event()  # the supervisor's "g": no other process of our name is left
    if not hold:
        go.set()
    worker = Worker(settings, registry, slot=slot, on_ready=heartbeat.ready, killer=killer,
                    counts_page=page, go=go)

    async def announce(entry_id: bytes | None) -> None:
        await heartbeat.alone(entry_id, worker)

    worker.redelivery.announce = announce

    def stop() -> None:
        # One path at every moment of the worker's life: booting, the boot ends without
        # READY (Worker.run races it with this flag); reading, it drains.
        worker.request_stop()
        loop.call_later(NUDGE_AFTER, nudge)

    def nudge() -> None:
        # Python 3.11's asyncio.wait_for (used inside redis-py's execute_command) can
        # swallow a cancellation that lands as the awaited call completes (CPython
        # gh-86296, fixed in 3.12).  Worker._drain cancels its loops once; a loop whose
        # cancel was swallowed reads on and the worker never exits.  Such a task is
        # still alive with a cancel request pending (cancelling() > 0): cancel it again.
        # Tasks the worker is letting finish on their own (cancelling() == 0, e.g. the
        # read loop after CLIENT UNBLOCK) are left alone.
        left = [t for t in asyncio.all_tasks() if t.get_name() in ("consume", "reclaim")
                and not t.done()]
        for t in left:
            if t.cancelling() > 0:
                t.cancel()
        if left:
            loop.call_later(NUDGE_EVERY, nudge)

    def on_lifeline() -> None:
        try:
            data = os.read(lifeline_fd, 64)
        except BlockingIOError:
            return
        if data:
            if b"g" in data:  # the supervisor: no other process of our name is left
                go.set()
            if b"q" in data:
                heartbeat.asked.set()
            return
        if not data:
            loop.remove_reader(lifeline_fd)
            log.warning("worker slot %d: supervisor is gone; finishing in-flight jobs and "
                        "exiting", slot)
            orphan_deadline(settings, slot)
            stop()

    os.set_blocking(lifeline_fd, False)
    loop.add_signal_handler(signal.SIGTERM, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # one sent at boot: now
    loop.add_reader(lifeline_fd, on_lifeline)
    tasks = [asyncio.create_task(heartbeat.run(worker, settings.heartbeat_interval))]
    if slot == 0:
        tasks.append(asyncio.create_task(heartbeat.queue_status(worker, settings)))
    try:
        await worker.run()
    finally:
        loop.remove_reader(lifeline_fd)
        # slot 0's queue status reads Redis: a cancel it swallows must not keep us alive
        await lifecycle.cancel_and_wait(tasks)
        with contextlib.suppress(Exception):
            heartbeat.beat(worker)  # the final counters, so the supervisor's totals are exact
        transport.close()
        os.close(lifeline_fd)
