"""The supervisor's decisions, as plain functions of numbers: no clock, no OS calls.

The loop (loop.py) measures (monotonic time, heartbeats, exit codes, RSS), asks
here what that means, and acts (fork, signal, exit).  So every rule can be tested in
microseconds (tests/supervisor/test_decisions.py) beside the subprocess tests that
show the loop applies them.

- respawn backoff: 0.1 s, 0.2 s, ... 10 s per slot, no jitter (backoff.py), reset
  after STABLE_AFTER seconds of good health or when the dead worker handled a job;
- flapping: more than flap_max restarts across the pool within flap_window while no
  worker made progress (handled a job) in that window: exit 70;
- poison: a worker that dies while it runs an entry alone was killed by that entry;
  the cause (signal or exit code) goes to the slot's next worker, which dead-letters it;
- boot verdicts: every slot failed to boot boot_retries times in a row, or no worker
  was ever ready within boot_timeout: exit with the children's code (69/78, else 70);
- hang detection and kill deadlines: silent past heartbeat_timeout (or no sign of
  life boot_timeout + 5 s after the fork) -> SIGABRT; still alive ABORT_GRACE later,
  or past its graceful stop deadline -> SIGKILL;
- the loop's own lateness: back more than STALL_AFTER later than it asked to sleep
  (SIGSTOP, a blocked stderr or journald, a frozen cgroup, a debugger), the
  supervisor stalled, not its workers: the time is not charged to their silence;
- recycling: a ready worker over max_worker_memory gets a replacement, one at a time;
- rolling restart (SIGHUP): one slot at a time, in slot order, each replaced once its
  current process is ready; settings that shape the pool are kept.
"""

from __future__ import annotations

import collections
import enum
import math
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..backoff import Schedule
from ..config import Settings
from ..exitcodes import EX_CONFIG, EX_SOFTWARE, EX_UNAVAILABLE

RESPAWN = Schedule(base=0.1, cap=10.0, jitter=False)  # a kill -9 is back within 0.1 s
STABLE_AFTER = 30.0     # seconds of good health that reset a slot's backoff
ABORT_GRACE = 2.0       # SIGABRT (thread dump) -> SIGKILL, at most this long
STOP_MARGIN = 2.0       # graceful_timeout + this, then SIGKILL (the acks need a moment)
NO_LIFE_MARGIN = 5.0    # boot_timeout + this without a line on the pipe: hung at boot
FORK_RETRY = 1.0        # a failed fork (EAGAIN, ENOMEM) is retried this much later
STALL_AFTER = 1.0       # the loop back this much later than it asked: it stalled
# Settings that shape the pool: a SIGHUP cannot change them (that takes a restart).
POOL_SHAPE = ("workers", "consumer", "metrics_port", "metrics_host")


# -- respawning, flapping, boot --------------------------------------------------------

def respawn_delay(failures: int) -> float:
    """Delay before the next fork of a slot after `failures` (>= 1) in a row."""
    return RESPAWN.delay(failures - 1)


def is_stable(ready_at: float | None, now: float) -> bool:
    """Ran long enough since READY that its slot's crash count starts over."""
    return ready_at is not None and now - ready_at > STABLE_AFTER


def crashes_after_exit(crashes: int, ready_at: float, now: float,
                       progressed: bool = False) -> int:
    """The slot's consecutive crashes, counting this one (it was READY at ready_at).

    progressed: the dead worker handled a job.  Then the slot works and the crash was
    a job's (poison, dead-lettered after a bounded number of them): the backoff starts
    over, or a few poison jobs would leave the slot 10 s per crash out of work."""
    return (0 if progressed or is_stable(ready_at, now) else crashes) + 1


class RestartWindow:
    """Runtime restarts across the pool in the last `window` seconds (flapping).

    Flapping is defined by progress: more than `limit` restarts in the window count
    only when no worker handled a job in that window either.  A fleet that cannot work
    (a bad deploy, a handler that kills every process) handles nothing and trips it; a
    stream of poison jobs among jobs that complete does not (each poison job costs a
    bounded number of crashes and is dead-lettered; redelivery.py).  Dead letters are
    not progress: a fleet whose every job kills it would otherwise dead-letter the
    whole stream instead of stopping."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self.times: collections.deque[float] = collections.deque()

    def record(self, now: float, progress_at: float = -math.inf) -> bool:
        """Count a restart at `now`; True when that makes the pool flap.  progress_at:
        when a worker last handled a job (monotonic; -inf: never)."""
        self.times.append(now)
        while self.times and self.times[0] < now - self.window:
            self.times.popleft()
        return len(self.times) > self.limit and progress_at < now - self.window

    def __len__(self) -> int:
        return len(self.times)


def killer_cause(code: int, hung: str = "") -> str:
    """What a worker's death says about the entry it ran alone: 'killed its worker:
    SIGABRT', '... exit 1', or, when the supervisor aborted it as hung, why."""
    how = signal_name(-code) if code < 0 else f"exit {code}"
    if hung:
        return f"hung its worker ({hung}), killed with {how}"
    return f"killed its worker: {how}"


def signal_name(signum: int) -> str:
    """'SIGABRT', or 'signal 70' for a number with no name: how a death by a signal is
    named in every line about it (the render process's deaths too, tickets/render_rules)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def boot_exit_code(child_code: int) -> int:
    """A boot failure's child exit code -> the supervisor's exit code."""
    return child_code if child_code in (EX_CONFIG, EX_UNAVAILABLE) else EX_SOFTWARE


def every_slot_failed_boot(boot_failures: Iterable[int], retries: int) -> bool:
    return all(n >= retries for n in boot_failures)


def boot_timeout_code(last_boot_codes: Sequence[int]) -> int:
    """Exit code when no worker became ready within boot_timeout."""
    return boot_exit_code(last_boot_codes[-1]) if last_boot_codes else EX_UNAVAILABLE


# -- hangs and deadlines ---------------------------------------------------------------

class Act(enum.Enum):
    NOTHING = "nothing"
    ABORT = "abort"            # SIGABRT: dump the stacks, then die
    KILL_HUNG = "kill-hung"    # SIGKILL: still alive ABORT_GRACE after SIGABRT
    KILL_STOP = "kill-stop"    # SIGKILL: past its graceful stop deadline


def watch(now: float, *, started: float, last_hb: float | None,
          stop_deadline: float | None, abort_deadline: float | None,
          heartbeat_timeout: float, boot_timeout: float) -> tuple[Act, str]:
    """What to do about one worker process now, and why (for ABORT)."""
    if abort_deadline is not None:
        return (Act.KILL_HUNG, "") if now >= abort_deadline else (Act.NOTHING, "")
    if stop_deadline is not None and now >= stop_deadline:
        return Act.KILL_STOP, ""
    if last_hb is not None:
        silent = now - last_hb
        if silent > heartbeat_timeout:
            return Act.ABORT, f"no heartbeat for {silent:.1f}s"
    elif now - started > boot_timeout + NO_LIFE_MARGIN:
        return Act.ABORT, f"no sign of life {now - started:.1f}s after fork"
    return Act.NOTHING, ""


def loop_lateness(gap: float, asked: float, after: float = STALL_AFTER) -> float:
    """How long the loop itself stalled: `gap` seconds passed since it last judged the
    workers, when it asked to sleep at most `asked` (its tick) in between.  0 for the
    usual jitter; beyond `after` (STALL_AFTER), the whole excess: nobody read the
    workers' heartbeats in that time, so their silence in it is the supervisor's, not
    theirs.  The render host's watch judges its own lateness by this rule too
    (tickets/render_rules.watch_lateness), with its own `after`."""
    late = gap - asked
    return late if late > after else 0.0


def forgiven(t: float, late: float, now: float) -> float:
    """A worker's last sign of life (or its fork time), moved on by the loop's stall:
    silence is counted as if the loop had not stopped, never beyond now."""
    return min(now, t + late)


def abort_deadline(now: float, heartbeat_timeout: float) -> float:
    return now + min(ABORT_GRACE, heartbeat_timeout)


def stop_deadline(now: float, graceful_timeout: float) -> float:
    return now + graceful_timeout + STOP_MARGIN


def wants_recycle(now: float, *, limit_mb: int, rss: int, ready: bool, replacing: bool,
                  aborting: bool, recycle_after: float) -> bool:
    """A ready worker over max_worker_memory (MB) gets a replacement (none running yet)."""
    return (bool(limit_mb) and ready and not replacing and not aborting
            and rss > limit_mb * 1024 * 1024 and now >= recycle_after)


# -- rolling restart -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SlotView:
    """A slot as the rolling restart sees it."""

    started: float | None   # when its current process was forked; None: no current
    ready: bool             # its current process is READY
    replacing: bool         # a replacement is already forked


def roll(queue: list[int], slots: Mapping[int, SlotView], reload_t: float
         ) -> tuple[int | None, bool]:
    """Advance a rolling restart begun at reload_t over the slots in `queue` (in order).

    Drops from the front of `queue` the slots that are gone, respawning or already
    forked after reload_t.  Returns (the slot to fork a replacement for now or None,
    whether the restart is complete: queue empty and every slot's current ready)."""
    while queue:
        view = slots.get(queue[0])
        if view is None or view.started is None or view.started >= reload_t:
            queue.pop(0)
            continue
        return (queue[0] if view.ready and not view.replacing else None), False
    return None, all(v.started is not None and v.ready for v in slots.values())


def pool_shape_changes(running: Settings, reread: Settings) -> list[str]:
    """Pool-shaping settings a re-read config file would change (they need a restart)."""
    return [name for name in POOL_SHAPE if getattr(reread, name) != getattr(running, name)]


def keep_pool_shape(running: Settings, reread: Settings) -> Settings:
    """The re-read settings with the running pool's shape (may raise ConfigError)."""
    return reread.replace(**{name: getattr(running, name) for name in POOL_SHAPE})
