"""stagedoor-supervise: keep N healthy worker processes running, and never lose a job.

Shape (gunicorn's arbiter, uvicorn's Process wrapper, circus' flapping limit):

    one thread, one loop: selectors over
        a signal wakeup fd      handlers only record the signal; the loop acts on it
        a heartbeat pipe        per worker: JSON lines {"t":"hb"|"ready", ...}
        a pidfd                 per worker, readable when it exits (else waitpid polling)
        the metrics endpoint    when --metrics-port > 0: the listener and each client
                                connection, non-blocking (telemetry/endpoint.py)
    every tick: reap, read every heartbeat pipe, check heartbeats and deadlines (the
    loop's own lateness, a stall of the supervisor, is not charged to the workers),
    respawn, ping systemd.

The supervisor never has a thread, an event loop, a Redis connection or a DNS lookup
at fork time (it checks the first two before every fork and refuses otherwise): what
the child inherits is only memory and the descriptors it closes at once.

Slots.  Worker k is consumer settings.consumer_name(k) forever: a respawned worker
reads its own pending list (id 0) before anything new, so the jobs a killed worker
held are handled again by its successor within a second, not after the 60 s claim
threshold.  A slot has one *current* process, and during a rolling restart or a
memory recycle also a *replacement*: the new process is forked, and only when it is
READY is the old one sent SIGTERM (it stops reading, finishes what it holds within
--graceful-timeout, acks, exits).  Both use the same consumer name, and a name's
pending list is re-read by whoever reads under it: so the new one reads nothing until
the old one has exited (it is forked `held`; pool.py writes "g" down its lifeline
then).  Of the live processes of one name, at most one reads (docs/supervisor.md).

Boot vs runtime.  A worker that exits before it reported READY failed to boot (bad
handler module -> exit 78, Redis unreachable for boot_timeout -> exit 69): the slot
backs off and retries; when no worker of the pool became ready within boot_timeout,
or every slot failed to boot `--boot-retries` times in a row, the supervisor exits
with the child's code so systemd sees it.  A worker that dies after READY crashed:
the same slot is respawned with exponential backoff (0.1 s, 0.2 s, ... 10 s, reset
after 30 s of good health, or when the dead worker handled a job); more than
`--flap-max` restarts in `--flap-window` seconds across the pool, with no job handled
in that time, is flapping: exit 70.  A worker that dies while it runs a redelivered
entry alone was killed by it: the slot's next worker dead-letters it with the cause
(worker/redelivery.py).  Redis out of memory at boot is
neither: the workers wait (XGROUP CREATE answers OOM) and report it in their
heartbeats; the supervisor keeps the boot deadline ahead, says so in STATUS= and
sends EXTEND_TIMEOUT_USEC so systemd's start timeout does not kill the wait.

The parts: this module is the loop (select, signals, stop, rolling restart, the
watchdog, exit); pool.py forks, reads, reaps and respawns the workers; decisions.py
holds the rules as plain functions (no OS calls); state.py the bookkeeping;
report.py STATUS=, the status file and the metrics; signals.py the signal inbox;
process.py one forked child; systemd.py sd_notify.  The command line is stagedoor/cli/supervise.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from ..config import ConfigError, Settings
from ..exitcodes import EX_CONFIG, EX_OK, EX_SOFTWARE
from ..proctitle import set_title, supervisor_title
from ..telemetry.endpoint import MetricsBindError, MetricsEndpoint
from . import decisions as rules
from .decisions import SlotView
from .pool import Pool
from .process import ForkUnsafe
from .report import METRICS_WAIT, Reporter, redis_oom
from .signals import SignalInbox
from .state import Options, Slot
from .systemd import Notifier

log = logging.getLogger("stagedoor.supervisor")

TICK = 0.2              # longest the loop sleeps
EXTEND_EVERY = 5.0      # while the workers wait for Redis memory at boot, every this ...
EXTEND_BY = 30.0        # ... many seconds: EXTEND_TIMEOUT_USEC of this many, and STATUS


class Supervisor:
    """Run until stopped: `run()` returns the exit code (0, 69, 70, 78)."""

    def __init__(self, settings: Settings, options: Options | None = None,
                 notifier: Notifier | None = None, watchdog: float | None = None,
                 reload_settings: Callable[[], Settings] | None = None) -> None:
        self.options = options or Options()
        self.reload_settings = reload_settings
        self.settings_before_reload = settings
        self.notifier = notifier or Notifier(None)
        self.watchdog = watchdog
        self.selector = selectors.DefaultSelector()
        self.signals = SignalInbox()
        self.pool = Pool(settings, self.options, self.selector, give_up=self._give_up,
                         on_all_ready=self._on_all_ready,
                         on_replacement_failed=self._abandon_reload,
                         in_child=self._close_in_child)
        self.exit_code: int | None = None
        self.reload_queue: list[int] = []
        self.reloading = False
        self.reload_t = 0.0
        self.started = time.monotonic()
        self.boot_deadline = self.started + settings.boot_timeout
        self.next_extend = 0.0
        self.next_watchdog = self.started
        self.judged = self.started  # monotonic time the loop last judged the workers
        self.metrics: Any = None
        self.reporter = Reporter(self, self.started)

    @property
    def settings(self) -> Settings:
        return self.pool.settings

    @property
    def stopping(self) -> bool:
        return self.pool.stopping

    # -- setup and teardown -------------------------------------------------------------
    def _start_metrics(self) -> None:
        s = self.settings
        if s.metrics_port <= 0:
            return

        try:
            self.metrics = MetricsEndpoint(s.metrics_host, s.metrics_port,
                                           wait_limit=METRICS_WAIT)
        except MetricsBindError as e:
            raise ConfigError(str(e)) from None
        self.metrics.attach(self.selector)  # its connections too: none may block the loop
        log.info("metrics on http://%s:%d/metrics", s.metrics_host, s.metrics_port)

    def _close_metrics(self) -> None:
        if self.metrics is not None:
            with contextlib.suppress(Exception):
                self.metrics.close()

    def _close_in_child(self) -> None:
        """In a freshly forked child: let go of everything that is the supervisor's."""
        self.signals.restore()
        for h in self.pool.handles.values():
            h.proc.close()
        self.selector.close()
        self.signals.close()
        self.notifier.close()
        self._close_metrics()

    def _teardown(self) -> None:
        self.pool.kill_all()
        self.signals.restore()
        self.selector.close()
        self.signals.close()
        self._close_metrics()
        self.reporter.write_status_file(final=True)

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> int:
        self.signals.install(self.selector)
        try:
            self._start_metrics()
            for k in range(self.settings.workers):
                self.pool.slots[k] = Slot(k)
            set_title(supervisor_title(self.settings, len(self.pool.slots)))
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
        pool = self.pool
        now = time.monotonic()
        pool.spawn_due(now)
        asked = self._timeout(now)
        for key, mask in self.selector.select(asked):
            kind, handle = key.data
            if kind == "wake":
                self.signals.clear_wakeups()
            elif kind == "hb":
                pool.read(handle)
            elif kind == "pid":
                pool.reap(handle)
            elif kind == "metrics":
                self._serve_metrics(handle, mask)
        if self.metrics is not None:
            self._tick_metrics()
        while self.signals.pending:
            self._on_signal(self.signals.pending.popleft())
        pool.reap_all()
        pool.read_all()  # heartbeats are read before they are judged
        now = time.monotonic()
        self._forgive_stall(now, asked)
        self._check(now)
        self.judged = now
        self._advance_reload()
        self.reporter.report(now)
        if self.stopping and not pool.handles and self.exit_code is None:
            self.exit_code = EX_OK

    def _forgive_stall(self, now: float, asked: float) -> None:
        """The loop's own lateness is never charged to a worker: a supervisor stopped
        (SIGSTOP, a blocked stderr or journald, a frozen cgroup, a debugger) longer than
        heartbeat_timeout would otherwise abort every healthy worker when it resumes."""
        late = rules.loop_lateness(now - self.judged, asked)
        if not late:
            return
        log.warning("the supervisor's loop stalled for %.1fs (stopped, or blocked on a "
                    "write); that time is not counted against the workers' heartbeats",
                    late)
        self.pool.forgive(late, now)
        self.boot_deadline += late

    def _timeout(self, now: float) -> float:
        due = [s.next_spawn for s in self.pool.slots.values()
               if s.next_spawn is not None and s.current is None]
        t = min([TICK, *(d - now for d in due)])
        if self.metrics is not None:
            t = min(t, self.metrics.wait_time(now))
        return max(0.0, t)

    def _check(self, now: float) -> None:
        if self.watchdog is not None and now >= self.next_watchdog:
            self.notifier.watchdog()  # also while stopping: a long drain is not a hang
            self.next_watchdog = now + self.watchdog
        self.pool.watch_processes(now)
        if self.stopping:
            return
        if not self.pool.ever_ready and redis_oom(self.pool.handles.values()):
            # Full memory is an outage to wait out, not a boot failure: the workers
            # retry on their own; keep the deadline ahead and systemd's start timeout too.
            self.boot_deadline = now + self.settings.boot_timeout
            if now >= self.next_extend:
                self.next_extend = now + EXTEND_EVERY
                self.notifier.extend_timeout(EXTEND_BY, self.reporter.summary())
        if not self.pool.ever_ready and now > self.boot_deadline:
            codes = [sl.last_boot_code for sl in self.pool.slots.values()
                     if sl.last_boot_code is not None]
            self._give_up(f"no worker became ready within boot_timeout="
                          f"{self.settings.boot_timeout:g}s", rules.boot_timeout_code(codes))
            return
        self.pool.check_slots(now)

    def _on_all_ready(self) -> None:
        self.notifier.ready(self.reporter.summary())

    def _give_up(self, why: str, code: int) -> None:
        log.critical("giving up: %s; exit %d", why, code)
        print(f"stagedoor-supervise: {why}; exit {code}", file=sys.stderr, flush=True)
        self._begin_stop(quick=True)
        self.exit_code = code

    # -- signals --------------------------------------------------------------------------
    def _on_signal(self, sig: int) -> None:
        if sig == signal.SIGCHLD:
            return  # the reap pass after the select handles it
        name = signal.Signals(sig).name
        slots = self.pool.slots
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
            index = next(k for k in range(len(slots) + 1) if k not in slots)
            slots[index] = Slot(index)
            log.info("SIGTTIN: %d workers", len(slots))
            set_title(supervisor_title(self.settings, len(slots)))
        elif sig == signal.SIGTTOU:
            if len(slots) <= 1:
                log.info("SIGTTOU ignored: 1 worker is the minimum")
                return
            slot = slots.pop(max(slots))
            for h in (slot.replacement, slot.current):
                if h is not None:
                    self.pool.retire(h, "SIGTTOU")
            if slot.index in self.reload_queue:
                self.reload_queue.remove(slot.index)
            set_title(supervisor_title(self.settings, len(slots)))
            log.info("SIGTTOU: %d workers", len(slots))

    def _begin_stop(self, *, quick: bool) -> None:
        if not self.stopping:
            self.pool.stopping = True
            self.notifier.stopping(f"stopping: {self.reporter.summary()}")
        self.reload_queue.clear()
        self.pool.stop(quick=quick)

    # -- rolling restart ------------------------------------------------------------------
    def _begin_reload(self) -> None:
        if self.reloading:
            log.info("SIGHUP ignored: a rolling restart is already running")
            return
        self.settings_before_reload = self.settings
        self._reread_settings()
        self.reloading = True
        self.reload_t = time.monotonic()
        self.reload_queue = sorted(self.pool.slots)
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
        changed = rules.pool_shape_changes(self.settings, new)
        if changed:
            log.warning("SIGHUP: %s changed; that takes a restart (SIGTTIN/SIGTTOU for the "
                        "number of workers)", ", ".join(changed))
        try:
            self.pool.settings = rules.keep_pool_shape(self.settings, new)
        except ConfigError as e:
            log.error("SIGHUP: config not reloaded, keeping the running settings: %s", e)
            return
        log.info("SIGHUP: settings re-read")

    def _advance_reload(self) -> None:
        """One slot at a time: fork its replacement once the old one is ready; next slot
        when the slot's current process was forked after the SIGHUP."""
        if self.stopping or not self.reloading:
            return
        slots = self.pool.slots
        # Ready means serving: a new worker still waiting for its consumer name (held,
        # the old one of the slot draining) does not count yet.
        views = {k: SlotView(started=s.current.started if s.current else None,
                             ready=bool(s.current and s.current.ready and not s.current.held),
                             replacing=s.replacement is not None)
                 for k, s in slots.items()}
        index, done = rules.roll(self.reload_queue, views, self.reload_t)
        if index is not None and not self.pool.handing_over():
            # One slot at a time also while a slot's old worker drains: the next slot's
            # old worker is not stopped before this slot's new one reads.
            slots[index].replacement = self.pool.try_spawn(index, "replacement", "SIGHUP")
        elif done:
            self.reloading = False
            log.info("rolling restart done: %s", self.reporter.summary())
            self.notifier.ready(self.reporter.summary())

    def _abandon_reload(self) -> None:
        """A replacement died before READY: during a rolling restart, stop it there."""
        if not self.reloading:
            return
        log.error("rolling restart abandoned: the new workers do not boot; the "
                  "running workers and settings stay")
        self.pool.settings = self.settings_before_reload
        self.reload_queue.clear()
        self.reloading = False
        self.notifier.ready(self.reporter.summary())

    # -- metrics --------------------------------------------------------------------------
    def _serve_metrics(self, conn: Any, mask: int) -> None:
        r = self.reporter
        try:
            self.metrics.on_event(conn, mask, r.render_metrics, ready=r.probe,
                                  refresh=r.ask_for_queue)
        except Exception:
            log.exception("metrics endpoint failed to serve a scrape")

    def _tick_metrics(self) -> None:
        r = self.reporter
        try:
            self.metrics.tick(r.render_metrics, ready=r.probe, fresh=r.fresh())
        except Exception:
            log.exception("metrics endpoint failed to serve a scrape")
