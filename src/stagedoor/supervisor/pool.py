"""The pool of worker processes: fork, read heartbeats, reap, respawn, kill.

Acts on the decisions of decisions.py for each process and slot (respawn backoff,
flapping, boot failures, hangs, kill deadlines, memory recycling) and tells the loop
(loop.py) what only it can handle through callbacks: give up (exit), every worker
ready (READY=1), a replacement that died before READY (abandon a rolling restart).
"""

from __future__ import annotations

import contextlib
import logging
import math
import selectors
import signal
import time
from collections.abc import Callable
from typing import Any

import orjson
import psutil

from ..config import Settings
from ..exitcodes import EX_SOFTWARE
from ..telemetry.exporter import empty_totals, retire
from ..telemetry.shared_counts import make_page, merge, read_page
from ..worker.child import child_main
from ..worker.family import ProcessFamily
from . import decisions as rules
from .decisions import Act, RestartWindow
from .process import Process, assert_fork_safe, describe_status
from .state import Handle, Options, Slot

log = logging.getLogger("stagedoor.supervisor")

MAX_LINE = 1 << 22      # a heartbeat line longer than this is dropped


def _nothing() -> None:
    pass


def _handled(stats: dict[str, Any]) -> float:
    """The jobs a worker's counters say it handled (a heartbeat's snapshot)."""
    by_kind = (stats.get("counters") or {}).get("handled") or {}
    return sum(n for n in by_kind.values() if isinstance(n, int | float))


class Pool:
    """Slots and their processes.  `settings` is what new workers get (SIGHUP changes it)."""

    def __init__(self, settings: Settings, options: Options, selector: selectors.BaseSelector,
                 *, give_up: Callable[[str, int], None],
                 on_all_ready: Callable[[], None] = _nothing,
                 on_replacement_failed: Callable[[], None] = _nothing,
                 in_child: Callable[[], None] = _nothing) -> None:
        self.settings = settings
        self.options = options
        self.selector = selector
        self.give_up = give_up
        self.on_all_ready = on_all_ready
        self.on_replacement_failed = on_replacement_failed
        self.in_child = in_child
        self.slots: dict[int, Slot] = {}
        self.handles: dict[int, Handle] = {}
        self.retired: dict[str, Any] = empty_totals()
        self.queue: dict[str, Any] | None = None  # the last queue status a worker sent
        self.queue_at = -math.inf  # monotonic time it arrived
        self.restarts = 0
        self.recycled = 0
        self.progress_at = -math.inf  # monotonic time a worker last reported a handled job
        self.restart_window = RestartWindow(options.flap_max, options.flap_window)
        self.stopping = False
        self.ever_ready = False

    # -- spawning ---------------------------------------------------------------------
    def spawn_due(self, now: float) -> None:
        if self.stopping:
            return
        for slot in self.slots.values():
            if slot.current is None and slot.next_spawn is not None and slot.next_spawn <= now:
                slot.current = self.try_spawn(slot.index, "current")
                slot.next_spawn = None if slot.current else now + rules.FORK_RETRY

    def try_spawn(self, index: int, role: str, reason: str = "") -> Handle | None:
        """Fork a worker for the slot; a failed fork (EAGAIN, ENOMEM) is logged, retried later."""
        try:
            return self._spawn(index, role, reason)
        except OSError as e:
            log.error("cannot fork a worker for slot %d: %s; retrying in %gs", index, e,
                      rules.FORK_RETRY, extra={"slot": index})
            return None

    def _spawn(self, index: int, role: str, reason: str = "") -> Handle:
        assert_fork_safe()
        settings = self.settings
        name = settings.consumer_name(index)
        # One consumer name, one reading process: a process of this name still alive
        # (retiring, draining what it holds) works on the pending list the new one
        # would re-read first; the new one waits for it (held, _hand_over).
        held = any(x.consumer == name for x in self.handles.values())

        slot = self.slots.get(index)
        killer = slot.killer if slot is not None and role == "current" else None

        page = make_page()  # shared with the child: its counts survive its crash

        def child(hb_fd: int, life_fd: int) -> int:
            return child_main(settings, index, hb_fd, life_fd, killer, page, hold=held)

        try:
            proc = Process.fork(child, in_child=self.in_child)
        except BaseException:
            page.close()
            raise
        h = Handle(proc=proc, slot=index, consumer=name, role=role,
                   started=time.monotonic(), reason=reason, page=page, held=held)
        with contextlib.suppress(psutil.Error):
            h.family = ProcessFamily(proc.pid)
            h.cpu_seen = (time.monotonic(), h.family.cpu_seconds())
        self.handles[proc.pid] = h
        self.selector.register(proc.heartbeat_fd, selectors.EVENT_READ, ("hb", h))
        if proc.pidfd is not None:
            self.selector.register(proc.pidfd, selectors.EVENT_READ, ("pid", h))
        log.info("forked worker slot %d pid %d (%s%s)%s", index, proc.pid, role,
                 f": {reason}" if reason else "",
                 f"; it reads once the other process named {name} has exited"
                 if held else "", extra={"slot": index})
        return h

    def handing_over(self) -> bool:
        """A process waits for its consumer name (its slot's old worker drains)."""
        return any(h.held and h.role != "retiring" for h in self.handles.values())

    def _hand_over(self, name: str) -> None:
        """A process named `name` exited: if none of that name may read any more, let
        the one waiting for the name read ("g" down its lifeline).  Retiring held
        processes never get it (they were told to stop before they read anything);
        the slot's current goes before a replacement (which waits for the current
        in its turn: the current is retired once the replacement is READY)."""
        live = [x for x in self.handles.values() if x.consumer == name]
        if any(not x.held for x in live):
            return
        waiting = [x for x in live if x.role != "retiring"]
        if not waiting:
            return
        h = min(waiting, key=lambda x: (x.role != "current", x.started))
        h.held = False
        h.proc.ask(b"g")
        log.info("worker slot %d pid %d reads now: no other process named %s is left",
                 h.slot, h.pid, name, extra={"slot": h.slot, "consumer": name})

    # -- reading heartbeats ---------------------------------------------------------------
    def read(self, h: Handle) -> None:
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
        if len(h.buffer) > MAX_LINE:
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

    def read_all(self) -> None:
        """Every heartbeat pipe, whatever the select said: after a stall of the loop a
        restarted epoll_wait can come back with no events although every pipe is full,
        and heartbeats are read before they are judged."""
        for h in list(self.handles.values()):
            if h.proc.heartbeat_fd >= 0:
                self.read(h)

    def forgive(self, late: float, now: float) -> None:
        """The loop stalled `late` seconds: that silence is not the workers'."""
        for h in self.handles.values():
            if h.last_hb is not None:
                h.last_hb = rules.forgiven(h.last_hb, late, now)
            h.started = rules.forgiven(h.started, late, now)

    def _on_message(self, h: Handle, msg: dict[str, Any]) -> None:
        now = time.monotonic()
        h.last_hb = now
        kind = msg.get("t")
        if kind in ("hb", "alone") and isinstance(msg.get("stats"), dict):
            if _handled(msg["stats"]) > _handled(h.stats):
                self.progress_at = now  # a worker made progress: see RestartWindow
            h.stats = msg["stats"]
        if kind == "alone":
            entry = msg.get("id")
            h.alone = entry if isinstance(entry, str) else None
        elif kind == "hb":
            h.rss = int(msg.get("rss") or 0)
            if msg.get("queue") is not None:
                self.queue = msg["queue"]
                self.queue_at = now
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
        if h.role == "current":
            slot.killer = None  # dead-lettered at its boot (or no longer pending there)
        if h.role == "replacement" and slot.replacement is h:
            old, slot.current, slot.replacement = slot.current, h, None
            h.role = "current"
            if old is not None:
                self.retire(old, f"replaced by pid {h.pid} ({h.reason})")
        if self.stopping:
            return
        if not self.ever_ready and all(s.current is not None and s.current.ready
                                       for s in self.slots.values()):
            self.ever_ready = True
            log.info("all %d workers ready", len(self.slots))
            self.on_all_ready()

    # -- reaping --------------------------------------------------------------------------
    def reap(self, h: Handle) -> None:
        if self.handles.get(h.pid) is not h:
            return  # already reaped (a stale event of this select batch)
        code = h.proc.poll()
        if code is None:
            return
        self.read(h)  # whatever it wrote last (final counters)
        self._fold_page(h)
        handled = _handled(h.stats)
        self.forget(h)
        self._on_exit(h, code, handled)

    def forget(self, h: Handle) -> None:
        for fd in h.proc.fds():
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(fd)
        h.proc.close()
        self.handles.pop(h.pid, None)
        self._fold_page(h)
        retire(self.retired, h.stats)
        h.stats = {}
        if h.page is not None:
            h.page.close()
            h.page = None
        self._hand_over(h.consumer)

    @staticmethod
    def _fold_page(h: Handle) -> None:
        """Its counters after its last heartbeat (it may have died before the next)."""
        if h.page is not None:
            merge(h.stats, read_page(h.page))

    def _on_exit(self, h: Handle, code: int, handled: float = 0) -> None:
        """handled: the jobs it handled in its life (its last counters)."""
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
            slot.recycle_after = now + rules.STABLE_AFTER
            self.on_replacement_failed()
            return
        slot.current = None
        if h.ready_at is None:
            slot.boot_failures += 1
            slot.last_boot_code = code
            delay = rules.respawn_delay(slot.boot_failures)
            log.error("worker slot %d pid %d failed to boot (%s); attempt %d, next in "
                      "%.1fs", h.slot, h.pid, what, slot.boot_failures, delay, extra=extra)
            if rules.every_slot_failed_boot((s.boot_failures for s in self.slots.values()),
                                            self.options.boot_retries):
                self.give_up(f"every slot failed to boot {self.options.boot_retries} times "
                             f"in a row (last: {what})", rules.boot_exit_code(code))
                return
        else:
            slot.crashes = rules.crashes_after_exit(slot.crashes, h.ready_at, now,
                                                    progressed=handled > 0)
            self.restarts += 1
            delay = rules.respawn_delay(slot.crashes)
            log.error("worker slot %d pid %d died (%s) after %.1fs; respawning in %.2fs",
                      h.slot, h.pid, what, now - h.started, delay, extra=extra)
            if h.alone is not None:
                slot.killer = (h.alone, rules.killer_cause(code, h.hung))
                log.error("worker slot %d pid %d died while it ran entry %s alone: the "
                          "slot's next worker dead-letters it (%s)", h.slot, h.pid, h.alone,
                          slot.killer[1], extra={**extra, "entry_id": h.alone})
            if self.restart_window.record(now, self.progress_at):
                self.give_up(f"flapping: {len(self.restart_window)} worker restarts in "
                             f"{self.options.flap_window:g}s (limit {self.options.flap_max}) "
                             f"and no job handled in that time", EX_SOFTWARE)
                return
        slot.next_spawn = now + delay

    # -- deadlines, hangs, recycling ------------------------------------------------------
    def watch_processes(self, now: float) -> None:
        """SIGABRT the hung, SIGKILL the ones past their deadline."""
        s = self.settings
        for h in list(self.handles.values()):
            act, why = rules.watch(now, started=h.started, last_hb=h.last_hb,
                                   stop_deadline=h.stop_deadline,
                                   abort_deadline=h.abort_deadline,
                                   heartbeat_timeout=s.heartbeat_timeout,
                                   boot_timeout=s.boot_timeout)
            if act is Act.KILL_HUNG:
                log.error("worker slot %d pid %d still alive after SIGABRT: SIGKILL",
                          h.slot, h.pid, extra={"slot": h.slot})
                h.proc.send_signal(signal.SIGKILL)
                h.abort_deadline = float("inf")
            elif act is Act.KILL_STOP:
                log.warning("worker slot %d pid %d did not stop within %gs: SIGKILL (its "
                            "unfinished jobs stay pending)", h.slot, h.pid,
                            s.graceful_timeout + rules.STOP_MARGIN, extra={"slot": h.slot})
                h.proc.send_signal(signal.SIGKILL)
                h.stop_deadline = float("inf")
            elif act is Act.ABORT:
                self.abort(h, why)

    def check_slots(self, now: float) -> None:
        """Reset the backoff of slots that ran stable; recycle workers over the memory limit."""
        s = self.settings
        for slot in self.slots.values():
            cur = slot.current
            if cur is not None and slot.crashes and rules.is_stable(cur.ready_at, now):
                slot.crashes = 0
            if cur is not None and rules.wants_recycle(
                    now, limit_mb=s.max_worker_memory, rss=cur.rss, ready=cur.ready,
                    replacing=slot.replacement is not None,
                    aborting=cur.abort_deadline is not None, recycle_after=slot.recycle_after):
                self.recycled += 1
                log.warning("worker slot %d pid %d RSS %.1f MB > max_worker_memory %d MB: "
                            "recycling", slot.index, cur.pid, cur.rss / 2**20,
                            s.max_worker_memory, extra={"slot": slot.index})
                slot.replacement = self.try_spawn(slot.index, "replacement",
                                                  f"RSS of pid {cur.pid} over the limit")
                if slot.replacement is None:
                    slot.recycle_after = now + rules.FORK_RETRY

    def abort(self, h: Handle, why: str) -> None:
        log.error("worker slot %d pid %d is hung (%s): SIGABRT, thread dump follows on its "
                  "stderr", h.slot, h.pid, why, extra={"slot": h.slot})
        h.hung = why
        h.proc.send_signal(signal.SIGABRT)
        h.proc.send_signal(signal.SIGCONT)  # a stopped process must run to dump its stacks
        h.abort_deadline = rules.abort_deadline(time.monotonic(),
                                                self.settings.heartbeat_timeout)

    def retire(self, h: Handle, why: str) -> None:
        h.role = "retiring"
        h.reason = why
        h.stop_deadline = rules.stop_deadline(time.monotonic(), self.settings.graceful_timeout)
        log.info("stopping worker slot %d pid %d gracefully: %s", h.slot, h.pid, why,
                 extra={"slot": h.slot})
        h.proc.send_signal(signal.SIGTERM)

    # -- stopping -------------------------------------------------------------------------
    def stop(self, *, quick: bool) -> None:
        """SIGTERM every worker not already retiring (quick: SIGKILL every worker)."""
        self.stopping = True
        deadline = rules.stop_deadline(time.monotonic(), self.settings.graceful_timeout)
        for h in self.handles.values():
            if quick:
                h.proc.send_signal(signal.SIGKILL)
                h.stop_deadline = float("inf")
            elif h.role != "retiring":
                h.role = "retiring"
                h.stop_deadline = deadline
                h.proc.send_signal(signal.SIGTERM)

    def kill_all(self) -> None:
        """At exit: SIGKILL and reap whatever still runs."""
        for h in list(self.handles.values()):
            h.proc.send_signal(signal.SIGKILL)
            h.proc.wait()
            self.forget(h)

    def reap_all(self) -> None:
        """The waitpid fallback, and belt and braces beside the pidfds."""
        for h in list(self.handles.values()):
            if h.pid in self.handles:
                self.reap(h)

    def ready_count(self) -> int:
        return sum(1 for s in self.slots.values() if s.current is not None and s.current.ready)
