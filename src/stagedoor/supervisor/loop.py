"""stagedoor-supervise: keep N healthy worker processes running, and never lose a job.

Shape (gunicorn's arbiter, uvicorn's Process wrapper, circus' flapping limit):

    one thread, one loop: selectors over
        a signal wakeup fd      handlers only record the signal; the loop acts on it
        a heartbeat pipe        per worker: JSON lines {"t":"hb"|"ready", ...}
        a pidfd                 per worker, readable when it exits (else waitpid polling)
        the metrics endpoint    when --metrics-port > 0
    every tick: reap, check heartbeats and deadlines, respawn, ping systemd.

The supervisor never has a thread, an event loop, a Redis connection or a DNS lookup
at fork time (it checks the first two before every fork and refuses otherwise): what
the child inherits is only memory and the descriptors it closes at once.

Slots.  Worker k is consumer settings.consumer_name(k) forever: a respawned worker
reads its own pending list (id 0) before anything new, so the jobs a killed worker
held are handled again by its successor within a second, not after the 60 s claim
threshold.  A slot has one *current* process, and during a rolling restart or a
memory recycle also a *replacement*: the new process is forked, and only when it is
READY is the old one sent SIGTERM (it stops reading, finishes what it holds within
--graceful-timeout, acks, exits).  During that overlap both processes use the same
consumer name.  That is safe: the old one no longer reads, so it takes nothing new;
the new one's recovery pass hands it the shared PEL, and it skips nothing, but an
entry the old one is still finishing can be handed to the new one as well and run
twice (at-least-once, as everywhere; handlers are idempotent by outbox_id).

Boot vs runtime.  A worker that exits before it reported READY failed to boot (bad
handler module -> exit 78, Redis unreachable for boot_timeout -> exit 69): the slot
backs off and retries; when no worker of the pool became ready within boot_timeout,
or every slot failed to boot `--boot-retries` times in a row, the supervisor exits
with the child's code so systemd sees it.  A worker that dies after READY crashed:
the same slot is respawned with exponential backoff (0.1 s, 0.2 s, ... 10 s, reset
after 30 s of good health); more than `--flap-max` restarts in `--flap-window`
seconds across the pool is flapping: exit 70.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import psutil

from ..config import ConfigError, Settings
from ..exitcodes import EX_CONFIG, EX_OK, EX_SOFTWARE, EX_UNAVAILABLE
from ..ops.exporter import empty_totals, retire
from .process import Process, describe_status
from .systemd import Notifier

log = logging.getLogger("stagedoor.supervisor")


BACKOFF_FIRST = 0.1     # first respawn delay after a crash: a kill -9 is back within 1 s
BACKOFF_MAX = 10.0
STABLE_AFTER = 30.0     # seconds of good health that reset a slot's backoff
ABORT_GRACE = 2.0       # SIGABRT (thread dump) -> SIGKILL, at most this long
STOP_MARGIN = 2.0       # graceful_timeout + this, then SIGKILL (the acks need a moment)
STATUS_EVERY = 1.0      # most often a changed STATUS= goes to systemd
LOG_EVERY = 60.0        # the periodic resource log line
TICK = 0.2              # longest the loop sleeps
FORK_RETRY = 1.0        # a failed fork (EAGAIN, ENOMEM) is retried this much later

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGTTIN,
                   signal.SIGTTOU, signal.SIGCHLD)

# -- per-process and per-slot state --------------------------------------------------------

@dataclass
class Handle:
    """A live worker process as the policy sees it."""

    proc: Process
    slot: int
    consumer: str
    role: str                       # "current" | "replacement" | "retiring"
    started: float
    reason: str = ""                # why it is a replacement / retiring
    ready_at: float | None = None
    last_hb: float | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    rss: int = 0
    cpu: float = 0.0
    buffer: bytes = b""
    stop_deadline: float | None = None
    abort_deadline: float | None = None
    ps: psutil.Process | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def ready(self) -> bool:
        return self.ready_at is not None


@dataclass
class Slot:
    index: int
    current: Handle | None = None
    replacement: Handle | None = None
    next_spawn: float | None = 0.0  # when to fork a current; None: not wanted now
    crashes: int = 0                # consecutive runtime crashes (backoff exponent)
    boot_failures: int = 0          # consecutive deaths before READY
    last_boot_code: int | None = None
    recycle_after: float = 0.0      # no memory recycle before this (after a failed one)


@dataclass(frozen=True)
class Options:
    """Supervisor-only knobs (flags, not Settings: they mean nothing to a worker)."""

    flap_max: int = 20
    flap_window: float = 60.0
    boot_retries: int = 3
    status_file: str = ""


class ForkUnsafe(RuntimeError):
    """A thread or an event loop exists in the supervisor: forking would copy it."""


def assert_fork_safe() -> None:
    if threading.active_count() != 1:
        names = ", ".join(t.name for t in threading.enumerate())
        raise ForkUnsafe(f"refusing to fork: the supervisor has threads ({names})")
    if asyncio.events._get_running_loop() is not None:
        raise ForkUnsafe("refusing to fork: an asyncio loop is running in the supervisor")


def total(snap: dict[str, Any], counter: str) -> int:
    return int(sum((snap.get("counters") or {}).get(counter, {}).values()))


class Supervisor:
    def __init__(self, settings: Settings, options: Options | None = None,
                 notifier: Notifier | None = None, watchdog: float | None = None,
                 reload_settings: Callable[[], Settings] | None = None) -> None:
        self.settings = settings
        self.reload_settings = reload_settings
        self.settings_before_reload = settings
        self.options = options or Options()
        self.notifier = notifier or Notifier(None)
        self.watchdog = watchdog
        self.selector = selectors.DefaultSelector()
        self.slots: dict[int, Slot] = {}
        self.handles: dict[int, Handle] = {}
        self.retired: dict[str, Any] = empty_totals()
        self.queue: dict[str, Any] | None = None
        self.restarts = 0
        self.recycled = 0
        self.restart_times: collections.deque[float] = collections.deque()
        self.signals: collections.deque[int] = collections.deque()
        self.exit_code: int | None = None
        self.stopping = False
        self.ever_ready = False
        self.reload_queue: list[int] = []
        self.reloading = False
        self.reload_t = 0.0
        self.started = time.monotonic()
        self.boot_deadline = self.started + settings.boot_timeout
        self.next_watchdog = self.started
        self.next_status = 0.0
        self.last_status = ""
        self.next_log = self.started + LOG_EVERY
        self.last_status_file = b""
        self.metrics: Any = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._old_handlers: dict[int, Any] = {}

    # -- setup and teardown -------------------------------------------------------------
    def _install_signals(self) -> None:
        for sock in (self._wake_r, self._wake_w):
            sock.setblocking(False)
        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        for sig in HANDLED_SIGNALS:
            self._old_handlers[sig] = signal.signal(sig, self._record_signal)
        self.selector.register(self._wake_r, selectors.EVENT_READ, ("wake", None))

    def _record_signal(self, signum: int, _frame: Any) -> None:
        self.signals.append(signum)  # nothing else here: the loop acts on it

    def _start_metrics(self) -> None:
        s = self.settings
        if s.metrics_port <= 0:
            return
        from ..ops.exporter import MetricsBindError, MetricsEndpoint

        try:
            self.metrics = MetricsEndpoint(s.metrics_host, s.metrics_port)
        except MetricsBindError as e:
            raise ConfigError(str(e)) from None
        self.selector.register(self.metrics.fileno(), selectors.EVENT_READ, ("metrics", None))
        log.info("metrics on http://%s:%d/metrics", s.metrics_host, s.metrics_port)

    def _close_in_child(self) -> None:
        """In a freshly forked child: let go of everything that is the supervisor's."""
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        for h in self.handles.values():
            h.proc.close()
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
        self.notifier.close()
        if self.metrics is not None:
            with contextlib.suppress(Exception):
                self.metrics.close()

    def _teardown(self) -> None:
        for h in list(self.handles.values()):
            h.proc.send_signal(signal.SIGKILL)
            h.proc.wait()
            self._forget(h)
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
        if self.metrics is not None:
            with contextlib.suppress(Exception):
                self.metrics.close()
        self._write_status_file(final=True)

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> int:
        self._install_signals()
        try:
            self._start_metrics()
            for k in range(self.settings.workers):
                self.slots[k] = Slot(k)
            log.info("supervisor pid %d starting %d workers (consumers %s..)", os.getpid(),
                     self.settings.workers, self.settings.consumer_name(0))
            while self.exit_code is None:
                self._tick()
        except ConfigError as e:
            print(f"stagedoor-supervise: config error: {e}", file=sys.stderr, flush=True)
            self.exit_code = EX_CONFIG
        except ForkUnsafe as e:
            log.error("%s", e)
            self.exit_code = EX_SOFTWARE
        except Exception:
            log.exception("supervisor failed")
            self.exit_code = EX_SOFTWARE
        finally:
            self._teardown()
            self.notifier.close()
        log.info("supervisor exiting with %d", self.exit_code)
        return self.exit_code

    def _tick(self) -> None:
        now = time.monotonic()
        self._spawn_due(now)
        for key, _ in self.selector.select(self._timeout(now)):
            kind, handle = key.data
            if kind == "wake":
                with contextlib.suppress(BlockingIOError):
                    while self._wake_r.recv(512):
                        pass
            elif kind == "hb":
                self._read(handle)
            elif kind == "pid":
                self._reap(handle)
            elif kind == "metrics":
                self._serve_metrics()
        while self.signals:
            self._on_signal(self.signals.popleft())
        for h in list(self.handles.values()):  # waitpid fallback, and belt and braces
            if h.pid in self.handles:
                self._reap(h)
        now = time.monotonic()
        self._check(now)
        self._advance_reload()
        self._report(now)
        if self.stopping and not self.handles and self.exit_code is None:
            self.exit_code = EX_OK

    def _timeout(self, now: float) -> float:
        due = [s.next_spawn for s in self.slots.values()
               if s.next_spawn is not None and s.current is None]
        t = min([TICK, *(d - now for d in due)])
        return max(0.0, t)

    # -- spawning -----------------------------------------------------------------------
    def _spawn_due(self, now: float) -> None:
        if self.stopping:
            return
        for slot in self.slots.values():
            if slot.current is None and slot.next_spawn is not None and slot.next_spawn <= now:
                slot.current = self._try_spawn(slot.index, "current")
                slot.next_spawn = None if slot.current else now + FORK_RETRY

    def _try_spawn(self, index: int, role: str, reason: str = "") -> Handle | None:
        """_spawn, but a failed fork (EAGAIN, ENOMEM) is logged and retried later."""
        try:
            return self._spawn(index, role, reason)
        except OSError as e:
            log.error("cannot fork a worker for slot %d: %s; retrying in %gs", index, e,
                      FORK_RETRY, extra={"slot": index})
            return None

    def _spawn(self, index: int, role: str, reason: str = "") -> Handle:
        from ..worker.child import child_main

        assert_fork_safe()
        settings = self.settings

        def child(hb_fd: int, life_fd: int) -> int:
            return child_main(settings, index, hb_fd, life_fd)

        proc = Process.fork(child, in_child=self._close_in_child)
        h = Handle(proc=proc, slot=index, consumer=settings.consumer_name(index), role=role,
                   started=time.monotonic(), reason=reason)
        with contextlib.suppress(psutil.Error):
            h.ps = psutil.Process(proc.pid)
            h.ps.cpu_percent(None)
        self.handles[proc.pid] = h
        self.selector.register(proc.heartbeat_fd, selectors.EVENT_READ, ("hb", h))
        if proc.pidfd is not None:
            self.selector.register(proc.pidfd, selectors.EVENT_READ, ("pid", h))
        log.info("forked worker slot %d pid %d (%s%s)", index, proc.pid, role,
                 f": {reason}" if reason else "", extra={"slot": index})
        return h

    # -- reading heartbeats ---------------------------------------------------------------
    def _read(self, h: Handle) -> None:
        data = h.proc.read_heartbeats()
        if data is None:  # EOF: it exited or closed the pipe; the pidfd/waitpid reaps it
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(h.proc.heartbeat_fd)
            h.proc.close_heartbeat()
            return
        if not data:
            return
        lines = (h.buffer + data).split(b"\n")
        h.buffer = lines.pop()
        if len(h.buffer) > 1 << 22:
            log.warning("worker pid %d sent a 4 MB line; dropped", h.pid)
            h.buffer = b""
        for line in lines:
            if not line:
                continue
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                log.warning("worker pid %d sent a bad heartbeat line: %r", h.pid, line[:200])
                continue
            self._on_message(h, msg)

    def _on_message(self, h: Handle, msg: dict[str, Any]) -> None:
        now = time.monotonic()
        h.last_hb = now
        if msg.get("t") == "hb":
            h.stats = msg.get("stats") or h.stats
            h.rss = int(msg.get("rss") or 0)
            if msg.get("queue") is not None:
                self.queue = msg["queue"]
        elif msg.get("t") == "ready" and h.ready_at is None:
            self._on_ready(h, now)

    def _on_ready(self, h: Handle, now: float) -> None:
        h.ready_at = now
        log.info("worker slot %d pid %d ready in %.2fs", h.slot, h.pid, now - h.started,
                 extra={"slot": h.slot, "consumer": h.consumer})
        slot = self.slots.get(h.slot)
        if slot is None or h.role == "retiring":
            return
        slot.boot_failures = 0
        if h.role == "replacement" and slot.replacement is h:
            old, slot.current, slot.replacement = slot.current, h, None
            h.role = "current"
            if old is not None:
                self._retire(old, f"replaced by pid {h.pid} ({h.reason})")
        if self.stopping:
            return
        if not self.ever_ready and all(s.current is not None and s.current.ready
                                       for s in self.slots.values()):
            self.ever_ready = True
            log.info("all %d workers ready", len(self.slots))
            self.notifier.ready(self._summary())

    # -- reaping --------------------------------------------------------------------------
    def _reap(self, h: Handle) -> None:
        if self.handles.get(h.pid) is not h:
            return  # already reaped (a stale event of this select batch)
        code = h.proc.poll()
        if code is None:
            return
        self._read(h)  # whatever it wrote last (final counters)
        self._forget(h)
        self._on_exit(h, code)

    def _forget(self, h: Handle) -> None:
        for fd in h.proc.fds():
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(fd)
        h.proc.close()
        self.handles.pop(h.pid, None)
        retire(self.retired, h.stats)
        h.stats = {}

    def _on_exit(self, h: Handle, code: int) -> None:
        now = time.monotonic()
        what = describe_status(code)
        extra = {"slot": h.slot, "consumer": h.consumer}
        slot = self.slots.get(h.slot)
        if self.stopping or h.role == "retiring" or slot is None:
            log.info("worker slot %d pid %d exited (%s)", h.slot, h.pid, what, extra=extra)
            return
        if h.role == "replacement":
            if slot.replacement is h:
                slot.replacement = None
            log.error("replacement worker slot %d pid %d died before READY (%s); keeping "
                      "pid %s", h.slot, h.pid, what,
                      slot.current.pid if slot.current else None, extra=extra)
            slot.recycle_after = now + STABLE_AFTER
            if self.reloading:
                log.error("rolling restart abandoned: the new workers do not boot; the "
                          "running workers and settings stay")
                self.settings = self.settings_before_reload
                self.reload_queue.clear()
                self.reloading = False
                self.notifier.ready(self._summary())
            return
        slot.current = None
        if h.ready_at is None:
            slot.boot_failures += 1
            slot.last_boot_code = code
            delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(slot.boot_failures - 1, 20))
            log.error("worker slot %d pid %d failed to boot (%s); attempt %d, next in "
                      "%.1fs", h.slot, h.pid, what, slot.boot_failures, delay, extra=extra)
            if all(s.boot_failures >= self.options.boot_retries for s in self.slots.values()):
                self._give_up(f"every slot failed to boot {self.options.boot_retries} times "
                              f"in a row (last: {what})", boot_exit_code(code))
                return
        else:
            if now - h.ready_at > STABLE_AFTER:
                slot.crashes = 0
            slot.crashes += 1
            self.restarts += 1
            delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(slot.crashes - 1, 20))
            log.error("worker slot %d pid %d died (%s) after %.1fs; respawning in %.2fs",
                      h.slot, h.pid, what, now - h.started, delay, extra=extra)
            self.restart_times.append(now)
            while self.restart_times and self.restart_times[0] < now - self.options.flap_window:
                self.restart_times.popleft()
            if len(self.restart_times) > self.options.flap_max:
                self._give_up(f"flapping: {len(self.restart_times)} worker restarts in "
                              f"{self.options.flap_window:g}s (limit {self.options.flap_max})",
                              EX_SOFTWARE)
                return
        slot.next_spawn = now + delay

    def _give_up(self, why: str, code: int) -> None:
        log.critical("giving up: %s; exit %d", why, code)
        print(f"stagedoor-supervise: {why}; exit {code}", file=sys.stderr, flush=True)
        self._begin_stop(quick=True)
        self.exit_code = code

    # -- timers ---------------------------------------------------------------------------
    def _check(self, now: float) -> None:
        s = self.settings
        if self.watchdog is not None and now >= self.next_watchdog:
            self.notifier.watchdog()  # also while stopping: a long drain is not a hang
            self.next_watchdog = now + self.watchdog
        for h in list(self.handles.values()):
            if h.abort_deadline is not None:
                if now >= h.abort_deadline:
                    log.error("worker slot %d pid %d still alive after SIGABRT: SIGKILL",
                              h.slot, h.pid, extra={"slot": h.slot})
                    h.proc.send_signal(signal.SIGKILL)
                    h.abort_deadline = float("inf")
                continue
            if h.stop_deadline is not None and now >= h.stop_deadline:
                log.warning("worker slot %d pid %d did not stop within %gs: SIGKILL (its "
                            "unfinished jobs stay pending)", h.slot, h.pid,
                            s.graceful_timeout + STOP_MARGIN, extra={"slot": h.slot})
                h.proc.send_signal(signal.SIGKILL)
                h.stop_deadline = float("inf")
                continue
            if h.last_hb is not None:
                silent = now - h.last_hb
                if silent > s.heartbeat_timeout:
                    self._abort(h, f"no heartbeat for {silent:.1f}s")
            elif now - h.started > s.boot_timeout + 5.0:
                self._abort(h, f"no sign of life {now - h.started:.1f}s after fork")
        if self.stopping:
            return
        if not self.ever_ready and now > self.boot_deadline:
            codes = [sl.last_boot_code for sl in self.slots.values()
                     if sl.last_boot_code is not None]
            code = boot_exit_code(codes[-1]) if codes else EX_UNAVAILABLE
            self._give_up(f"no worker became ready within boot_timeout="
                          f"{s.boot_timeout:g}s", code)
            return
        for slot in self.slots.values():
            cur = slot.current
            if (cur is not None and cur.ready_at is not None and slot.crashes
                    and now - cur.ready_at > STABLE_AFTER):
                slot.crashes = 0
            if (s.max_worker_memory and cur is not None and cur.ready
                    and slot.replacement is None and cur.abort_deadline is None
                    and cur.rss > s.max_worker_memory * 1024 * 1024
                    and now >= slot.recycle_after):
                self.recycled += 1
                log.warning("worker slot %d pid %d RSS %.1f MB > max_worker_memory %d MB: "
                            "recycling", slot.index, cur.pid, cur.rss / 2**20,
                            s.max_worker_memory, extra={"slot": slot.index})
                slot.replacement = self._try_spawn(slot.index, "replacement",
                                                   f"RSS of pid {cur.pid} over the limit")
                if slot.replacement is None:
                    slot.recycle_after = now + FORK_RETRY

    def _abort(self, h: Handle, why: str) -> None:
        log.error("worker slot %d pid %d is hung (%s): SIGABRT, thread dump follows on its "
                  "stderr", h.slot, h.pid, why, extra={"slot": h.slot})
        h.proc.send_signal(signal.SIGABRT)
        h.proc.send_signal(signal.SIGCONT)  # a stopped process must run to dump its stacks
        h.abort_deadline = time.monotonic() + min(ABORT_GRACE, self.settings.heartbeat_timeout)

    def _retire(self, h: Handle, why: str) -> None:
        h.role = "retiring"
        h.reason = why
        h.stop_deadline = time.monotonic() + self.settings.graceful_timeout + STOP_MARGIN
        log.info("stopping worker slot %d pid %d gracefully: %s", h.slot, h.pid, why,
                 extra={"slot": h.slot})
        h.proc.send_signal(signal.SIGTERM)

    # -- signals --------------------------------------------------------------------------
    def _on_signal(self, sig: int) -> None:
        if sig == signal.SIGCHLD:
            return  # the reap pass after the select handles it
        name = signal.Signals(sig).name
        if sig in (signal.SIGTERM, signal.SIGINT):
            if self.stopping:
                log.warning("%s again: quick stop, SIGKILL to every worker", name)
                self._begin_stop(quick=True)
            else:
                log.info("%s: stopping gracefully (graceful_timeout %gs)", name,
                         self.settings.graceful_timeout)
                self._begin_stop(quick=False)
        elif self.stopping:
            log.info("%s ignored while stopping", name)
        elif sig == signal.SIGHUP:
            self._begin_reload()
        elif sig == signal.SIGTTIN:
            index = next(k for k in range(len(self.slots) + 1) if k not in self.slots)
            self.slots[index] = Slot(index)
            log.info("SIGTTIN: %d workers", len(self.slots))
        elif sig == signal.SIGTTOU:
            if len(self.slots) <= 1:
                log.info("SIGTTOU ignored: 1 worker is the minimum")
                return
            slot = self.slots.pop(max(self.slots))
            for h in (slot.replacement, slot.current):
                if h is not None:
                    self._retire(h, "SIGTTOU")
            if slot.index in self.reload_queue:
                self.reload_queue.remove(slot.index)
            log.info("SIGTTOU: %d workers", len(self.slots))

    def _begin_stop(self, *, quick: bool) -> None:
        if not self.stopping:
            self.stopping = True
            self.notifier.stopping(f"stopping: {self._summary()}")
        self.reload_queue.clear()
        deadline = time.monotonic() + self.settings.graceful_timeout + STOP_MARGIN
        for h in self.handles.values():
            if quick:
                h.proc.send_signal(signal.SIGKILL)
                h.stop_deadline = float("inf")
            elif h.role != "retiring":
                h.role = "retiring"
                h.stop_deadline = deadline
                h.proc.send_signal(signal.SIGTERM)

    def _begin_reload(self) -> None:
        if self.reloading:
            log.info("SIGHUP ignored: a rolling restart is already running")
            return
        self.settings_before_reload = self.settings
        self._reread_settings()
        self.reloading = True
        self.reload_t = time.monotonic()
        self.reload_queue = sorted(self.slots)
        self.notifier.reloading()
        log.info("SIGHUP: rolling restart of %d workers", len(self.reload_queue))

    def _reread_settings(self) -> None:
        """SIGHUP re-reads the --config file (the flags and the environment cannot have
        changed); the new workers get the new settings.  A bad file keeps the old ones.
        The pool's shape (workers, consumer names, metrics address) needs a restart."""
        if self.reload_settings is None:
            return
        try:
            new = self.reload_settings()
        except ConfigError as e:
            log.error("SIGHUP: config not reloaded, keeping the running settings: %s", e)
            return
        fixed = {name: getattr(self.settings, name)
                 for name in ("workers", "consumer", "metrics_port", "metrics_host")}
        changed = [name for name, value in fixed.items() if getattr(new, name) != value]
        if changed:
            log.warning("SIGHUP: %s changed; that takes a restart (SIGTTIN/SIGTTOU for the "
                        "number of workers)", ", ".join(changed))
        try:
            self.settings = new.replace(**fixed)
        except ConfigError as e:
            log.error("SIGHUP: config not reloaded, keeping the running settings: %s", e)
            return
        log.info("SIGHUP: settings re-read")

    def _advance_reload(self) -> None:
        """One slot at a time: fork its replacement once the old one is ready; next slot
        when the slot's current process was forked after the SIGHUP."""
        if self.stopping or not self.reloading:
            return
        while self.reload_queue:
            slot = self.slots.get(self.reload_queue[0])
            if slot is None or slot.current is None or slot.current.started >= self.reload_t:
                self.reload_queue.pop(0)  # gone, respawning (new code), or new already
                continue
            if slot.replacement is None and slot.current.ready:
                slot.replacement = self._try_spawn(slot.index, "replacement", "SIGHUP")
            return
        if all(s.current is not None and s.current.ready for s in self.slots.values()):
            self.reloading = False
            log.info("rolling restart done: %s", self._summary())
            self.notifier.ready(self._summary())

    # -- reporting ------------------------------------------------------------------------
    def _summary(self) -> str:
        ready = sum(1 for s in self.slots.values() if s.current is not None and s.current.ready)
        live = list(self.handles.values())
        handled = total(self.retired, "handled") + sum(total(h.stats, "handled") for h in live)
        rss = [h.rss for h in live if h.rss]
        text = f"workers {ready}/{len(self.slots)} ready, handled {handled}, " \
               f"restarts {self.restarts}"
        if rss:
            text += f", rss {sum(rss) / 2**20:.1f} MB (max {max(rss) / 2**20:.1f})"
        cpu = sum(h.cpu for h in live)
        if live:
            text += f", cpu {cpu:.0f}%"
        return text

    def _report(self, now: float) -> None:
        if now >= self.next_status:
            for h in self.handles.values():
                if h.ps is not None:
                    with contextlib.suppress(psutil.Error):
                        h.cpu = h.ps.cpu_percent(None)
            text = self._summary()
            if self.stopping:
                text = "stopping: " + text
            if text != self.last_status:
                self.notifier.status(text)
                self.last_status = text
            self.next_status = now + STATUS_EVERY
        if now >= self.next_log:
            self.next_log = now + LOG_EVERY
            per = ", ".join(f"{h.slot}:{h.pid} {h.rss / 2**20:.1f}MB {h.cpu:.0f}%"
                            for h in sorted(self.handles.values(), key=lambda x: x.slot))
            log.info("%s; per worker: %s", self._summary(), per)
        self._write_status_file()

    def status(self) -> dict[str, Any]:
        """Who is running, for --status-file (monitoring scripts and the tests)."""
        return {
            "pid": os.getpid(),
            "ready": self.ever_ready,
            "stopping": self.stopping,
            "reloading": self.reloading,
            "restarts": self.restarts,
            "recycled": self.recycled,
            "handled": total(self.retired, "handled")
            + sum(total(h.stats, "handled") for h in self.handles.values()),
            "slots": {str(k): {"pid": s.current.pid if s.current else None,
                               "ready": bool(s.current and s.current.ready),
                               "consumer": self.settings.consumer_name(k),
                               "replacement": s.replacement.pid if s.replacement else None}
                      for k, s in sorted(self.slots.items())},
            "processes": sorted(({"pid": h.pid, "slot": h.slot, "role": h.role,
                                  "ready": h.ready, "rss": h.rss}
                                 for h in self.handles.values()), key=lambda d: d["pid"]),
        }

    def _write_status_file(self, final: bool = False) -> None:
        path = self.options.status_file
        if not path:
            return
        status = self.status()
        if final:
            status["exit_code"] = self.exit_code
        data = orjson.dumps(status)
        if data == self.last_status_file:
            return
        self.last_status_file = data
        tmp = f"{path}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as e:
            log.warning("cannot write status file %s: %s", path, e)

    def render_metrics(self) -> bytes:
        from ..ops.exporter import render_metrics

        workers = {h.slot: h.stats for h in self.handles.values() if h.role != "retiring"}
        # A copy all the way down: self.retired must only grow when a worker exits.
        retired = retire(empty_totals(), self.retired)
        for h in self.handles.values():  # a retiring worker's counters still count
            if h.role == "retiring":
                retire(retired, h.stats)
        extra = {"workers_ready": float(sum(1 for s in self.slots.values()
                                            if s.current is not None and s.current.ready)),
                 "workers_wanted": float(len(self.slots)),
                 "worker_rss_bytes": float(sum(h.rss for h in self.handles.values()))}
        out: bytes = render_metrics(workers, retired, self.queue, self.restarts,
                                    extra_gauges=extra)
        return out

    def _serve_metrics(self) -> None:
        try:
            self.metrics.handle_readable(self.render_metrics)
        except Exception:
            log.exception("metrics endpoint failed to serve a scrape")


def boot_exit_code(child_code: int) -> int:
    """A boot failure's child exit code -> the supervisor's exit code."""
    return child_code if child_code in (EX_CONFIG, EX_UNAVAILABLE) else EX_SOFTWARE
