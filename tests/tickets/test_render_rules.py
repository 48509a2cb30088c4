"""The render process's rules (stagedoor.tickets.render_rules), in process: no exec, no
clock, no event loop.

The process tests (test_render_abort.py, test_render_stale.py, test_render_frozen.py)
show the render host applies them to a real render process; these pin each rule's
numbers and edges.
"""

from __future__ import annotations

import pytest

from stagedoor.supervisor import decisions
from stagedoor.tickets import render_rules as rules
from stagedoor.tickets.render_rules import Next


def test_a_failed_start_waits_a_tenth_of_a_second_doubling_to_five() -> None:
    assert [rules.START.delay(n) for n in range(8)] == [
        0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_the_renders_waiting_fail_after_three_failed_starts_in_a_row() -> None:
    assert not rules.gives_up_starting(rules.START_ATTEMPTS - 1)
    assert rules.gives_up_starting(rules.START_ATTEMPTS)
    assert rules.gives_up_starting(rules.START_ATTEMPTS + 5)
    assert rules.START_ATTEMPTS == 3


def test_the_start_backoff_starts_over_after_a_verdict_or_a_process_that_worked() -> None:
    assert rules.backoff_starts_over(explained=True, lived=0.0)
    assert rules.backoff_starts_over(explained=False, lived=rules.SHORT_LIFE)
    assert not rules.backoff_starts_over(explained=False, lived=rules.SHORT_LIFE - 0.01)


@pytest.mark.parametrize(("rc", "name"), [
    (-6, "SIGABRT"), (-9, "SIGKILL"), (-11, "SIGSEGV"), (1, "exit status 1"),
    (0, "exit status 0"), (-70, "signal 70")])
def test_a_process_end_is_named_by_its_signal_or_exit_status(rc: int, name: str) -> None:
    assert rules.death(rc) == name


def test_a_render_alone_in_a_process_that_died_is_its_culprit() -> None:
    assert rules.died_alone("SIGABRT", 0) is Next.CULPRIT
    assert rules.died_alone("SIGSEGV", 0) is Next.CULPRIT
    assert rules.died_alone("exit status 1", 0) is Next.CULPRIT


def test_a_first_sigkill_alone_gets_one_more_run_alone() -> None:
    # a kill -9 or the OOM killer may have been someone else's doing
    assert rules.died_alone("SIGKILL", 0) is Next.AGAIN
    assert rules.died_alone("SIGKILL", 1) is Next.CULPRIT
    # a SIGKILL after a SIGABRT alone cannot happen (that was a verdict); after a stall
    # or a first SIGKILL it counts as the second
    assert rules.died_alone("SIGABRT", 1) is Next.CULPRIT


def test_the_watch_looks_every_second_or_every_quarter_of_a_short_timeout() -> None:
    assert rules.watch_tick(20.0) == 1.0
    assert rules.watch_tick(4.0) == 1.0
    assert rules.watch_tick(2.0) == 0.5
    assert rules.watch_tick(0.2) == 0.05


def test_a_render_is_overdue_only_past_render_timeout() -> None:
    assert not rules.overdue(now=120.0, sent=100.0, hang_after=20.0)
    assert rules.overdue(now=120.001, sent=100.0, hang_after=20.0)


def test_a_hang_is_judged_only_for_the_one_render_left_in_the_process() -> None:
    a, b = object(), object()
    assert rules.judged([a], a)
    assert not rules.judged([a, b], a)      # two left: both suspects, run alone
    assert not rules.judged([b], a)         # a replied before the kill: b is a suspect
    assert not rules.judged([], a)
    assert not rules.judged([a], None)      # died, not killed as hung: a is a suspect


def test_a_render_that_stalls_alone_runs_again_then_fails_as_transient() -> None:
    assert [rules.stalled_alone(n) for n in range(1, rules.STALLS + 2)] == [
        *[Next.AGAIN] * (rules.STALLS - 1), Next.TRANSIENT, Next.TRANSIENT]
    assert rules.STALLS == 3


def test_the_watch_charges_its_own_lateness_beyond_two_seconds_to_nobody() -> None:
    assert rules.watch_lateness(1.0, tick=1.0) == 0.0
    assert rules.watch_lateness(1.0 + rules.LOOP_LATE, tick=1.0) == 0.0
    assert rules.watch_lateness(31.0, tick=1.0) == pytest.approx(30.0)
    # the supervisor's rule with the render watch's margin (render_rules says why shared)
    assert rules.watch_lateness(2.5, tick=1.0) == decisions.loop_lateness(2.5, 1.0, after=2.0)
    assert decisions.loop_lateness(2.5, 1.0) == 1.5     # the supervisor's margin is 1 s
