"""The supervisor's rules (stagedoor.supervisor.decisions), in process: no fork, no clock.

The subprocess tests (test_supervisor.py, faults/test_supervisor.py) show the loop
applies them to real workers; these pin each rule's numbers and edges.
"""

from __future__ import annotations

import pytest

from stagedoor.config import Settings
from stagedoor.exitcodes import EX_CONFIG, EX_SOFTWARE, EX_UNAVAILABLE
from stagedoor.supervisor import decisions as rules
from stagedoor.supervisor.decisions import Act, RestartWindow, SlotView


def test_respawn_backoff_doubles_from_a_tenth_of_a_second_to_ten() -> None:
    assert [rules.respawn_delay(n) for n in range(1, 10)] == [
        0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]
    assert rules.respawn_delay(500) == 10.0


def test_crash_count_starts_over_after_a_stable_run() -> None:
    assert rules.crashes_after_exit(3, ready_at=100.0, now=100.0 + rules.STABLE_AFTER) == 4
    assert rules.crashes_after_exit(3, ready_at=100.0, now=100.1 + rules.STABLE_AFTER) == 1
    assert not rules.is_stable(None, 1e9)
    assert rules.is_stable(0.0, rules.STABLE_AFTER + 0.001)


def test_flapping_is_more_than_the_limit_within_the_window() -> None:
    window = RestartWindow(limit=3, window=10.0)
    assert [window.record(t) for t in (0.0, 1.0, 2.0)] == [False, False, False]
    assert window.record(3.0)                   # 4 restarts within 10 s
    fresh = RestartWindow(limit=3, window=10.0)
    assert not any(fresh.record(t) for t in (0.0, 5.0, 10.5, 15.0, 21.0))  # spread out
    assert len(fresh) == 2                      # 15.0 and 21.0 are within 10 s of 21.0


def test_crash_count_starts_over_when_the_dead_worker_handled_a_job() -> None:
    # A poison job's crash in a working slot: respawn at once, not after 10 s.
    assert rules.crashes_after_exit(7, ready_at=100.0, now=101.0, progressed=True) == 1
    assert rules.crashes_after_exit(7, ready_at=100.0, now=101.0, progressed=False) == 8


def test_flapping_needs_a_window_without_progress() -> None:
    window = RestartWindow(limit=3, window=10.0)
    # Jobs handled at t=2: five restarts within 10 s are poison among working jobs.
    assert not any(window.record(t, progress_at=2.0) for t in (4.0, 5.0, 6.0, 7.0, 8.0))
    # No job handled since t=2 and the window is past it: the fleet cannot work.
    assert window.record(12.5, progress_at=2.0)
    never = RestartWindow(limit=3, window=10.0)
    assert [never.record(t) for t in (0.0, 1.0, 2.0, 3.0)] == [False, False, False, True]


@pytest.mark.parametrize(("code", "hung", "cause"), [
    (-6, "", "killed its worker: SIGABRT"), (-9, "", "killed its worker: SIGKILL"),
    (1, "", "killed its worker: exit 1"),
    (-6, "no heartbeat for 5.1s", "hung its worker (no heartbeat for 5.1s), killed with SIGABRT"),
])
def test_the_cause_of_a_poison_job_names_the_signal(code: int, hung: str, cause: str) -> None:
    assert rules.killer_cause(code, hung) == cause


@pytest.mark.parametrize(("child", "supervisor"), [
    (EX_CONFIG, EX_CONFIG), (EX_UNAVAILABLE, EX_UNAVAILABLE), (1, EX_SOFTWARE),
    (-9, EX_SOFTWARE), (EX_SOFTWARE, EX_SOFTWARE)])
def test_boot_failure_exit_code(child: int, supervisor: int) -> None:
    assert rules.boot_exit_code(child) == supervisor


def test_boot_verdicts() -> None:
    assert rules.every_slot_failed_boot([3, 3, 5], retries=3)
    assert not rules.every_slot_failed_boot([3, 2, 5], retries=3)
    assert rules.boot_timeout_code([]) == EX_UNAVAILABLE
    assert rules.boot_timeout_code([EX_UNAVAILABLE, EX_CONFIG]) == EX_CONFIG
    assert rules.boot_timeout_code([EX_CONFIG, 1]) == EX_SOFTWARE


def _watch(now: float, **kw: float | None) -> tuple[Act, str]:
    args: dict[str, float | None] = {"started": 0.0, "last_hb": None, "stop_deadline": None,
                                     "abort_deadline": None}
    args.update(kw)
    return rules.watch(now, heartbeat_timeout=10.0, boot_timeout=30.0, **args)  # type: ignore[arg-type]


def test_hang_detection() -> None:
    assert _watch(5.0, last_hb=0.0) == (Act.NOTHING, "")
    assert _watch(10.0, last_hb=0.0) == (Act.NOTHING, "")       # not past it yet
    assert _watch(10.5, last_hb=0.0) == (Act.ABORT, "no heartbeat for 10.5s")
    # never a line on the pipe: boot_timeout + 5 s of grace
    assert _watch(35.0) == (Act.NOTHING, "")
    assert _watch(35.5) == (Act.ABORT, "no sign of life 35.5s after fork")


def test_kill_deadlines() -> None:
    # SIGABRT sent: nothing but waiting for its deadline, then SIGKILL
    assert _watch(99.0, last_hb=0.0, abort_deadline=100.0) == (Act.NOTHING, "")
    assert _watch(100.0, last_hb=0.0, abort_deadline=100.0) == (Act.KILL_HUNG, "")
    # asked to stop: SIGKILL at the deadline; before it, a silent one is still a hang
    assert _watch(100.0, last_hb=99.0, stop_deadline=100.0) == (Act.KILL_STOP, "")
    assert _watch(50.0, last_hb=0.0, stop_deadline=100.0)[0] is Act.ABORT
    assert rules.abort_deadline(7.0, heartbeat_timeout=10.0) == 7.0 + rules.ABORT_GRACE
    assert rules.abort_deadline(7.0, heartbeat_timeout=0.5) == 7.5
    assert rules.stop_deadline(7.0, graceful_timeout=30.0) == 37.0 + rules.STOP_MARGIN


def test_memory_recycling() -> None:
    over = {"limit_mb": 100, "rss": 101 * 2**20, "ready": True, "replacing": False,
            "aborting": False, "recycle_after": 0.0}
    assert rules.wants_recycle(1.0, **over)  # type: ignore[arg-type]
    for change in ({"limit_mb": 0}, {"rss": 100 * 2**20}, {"ready": False},
                   {"replacing": True}, {"aborting": True}, {"recycle_after": 2.0}):
        assert not rules.wants_recycle(1.0, **{**over, **change}), change  # type: ignore[arg-type]


def test_rolling_restart_goes_slot_by_slot_in_order() -> None:
    t0 = 100.0
    old = SlotView(started=50.0, ready=True, replacing=False)
    queue = [0, 1, 2]
    slots = {0: old, 1: old, 2: old}
    assert rules.roll(queue, slots, t0) == (0, False)
    slots[0] = SlotView(started=50.0, ready=True, replacing=True)   # its replacement boots
    assert rules.roll(queue, slots, t0) == (None, False)
    slots[0] = SlotView(started=101.0, ready=True, replacing=False)  # replaced
    assert rules.roll(queue, slots, t0) == (1, False)
    assert queue == [1, 2]
    # a slot whose current is respawning (none) or was forked after the SIGHUP is skipped
    slots[1] = SlotView(started=None, ready=False, replacing=False)
    slots[2] = SlotView(started=102.0, ready=False, replacing=False)
    assert rules.roll(queue, slots, t0) == (None, False)   # done once every slot is ready
    assert queue == []
    slots[1] = SlotView(started=103.0, ready=True, replacing=False)
    slots[2] = SlotView(started=102.0, ready=True, replacing=False)
    assert rules.roll(queue, slots, t0) == (None, True)
    # a slot not ready yet is waited for, not skipped
    q2 = [0]
    assert rules.roll(q2, {0: SlotView(started=50.0, ready=False, replacing=False)}, t0) == (
        None, False)
    assert q2 == [0]
    # a slot removed (SIGTTOU) is dropped from the queue
    q3 = [5, 0]
    assert rules.roll(q3, {0: old}, t0) == (0, False)
    assert q3 == [0]


def test_a_reload_keeps_the_pool_shape() -> None:
    running = Settings(redis_url="redis://127.0.0.1:1/0", workers=4, consumer="a",
                       metrics_port=9464, concurrency=8)
    reread = running.replace(workers=2, consumer="b", concurrency=16)
    assert rules.pool_shape_changes(running, reread) == ["workers", "consumer"]
    merged = rules.keep_pool_shape(running, reread)
    assert (merged.workers, merged.consumer, merged.metrics_port, merged.concurrency) == (
        4, "a", 9464, 16)


def test_the_loops_own_lateness_is_counted_only_beyond_its_jitter() -> None:
    assert rules.loop_lateness(0.25, asked=0.2) == 0.0
    assert rules.loop_lateness(0.2 + rules.STALL_AFTER, asked=0.2) == 0.0
    assert rules.loop_lateness(90.2, asked=0.2) == pytest.approx(90.0)
    assert rules.loop_lateness(5.0, asked=0.0) == 5.0


def test_a_stall_moves_a_workers_last_sign_of_life_on_but_never_past_now() -> None:
    # heard 1 s before a 90 s stall: silent for 1 s, not 91, when the loop resumes
    assert rules.forgiven(100.0, late=90.0, now=191.0) == 190.0
    # heard during the stall (its pipe was read after it): as it was, at most now
    assert rules.forgiven(191.0, late=90.0, now=191.0) == 191.0
    # a worker hung before the stall is still judged, only later
    act, _why = rules.watch(191.0, started=0.0, last_hb=rules.forgiven(95.0, 90.0, 191.0),
                            stop_deadline=None, abort_deadline=None,
                            heartbeat_timeout=5.0, boot_timeout=10.0)
    assert act is Act.ABORT
