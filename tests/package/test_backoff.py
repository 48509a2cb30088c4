"""One backoff (stagedoor.backoff) behind the three waits; each keeps its own shape."""

from __future__ import annotations

import random

from stagedoor.backoff import Backoff, Schedule, reconnect


def test_ceiling_doubles_up_to_the_cap_and_never_overflows() -> None:
    s = Schedule(0.05, 2.0)
    assert [s.ceiling(k) for k in range(7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0]
    assert s.ceiling(10_000) == 2.0


def test_full_jitter_draws_from_zero() -> None:
    rng = random.Random(7)
    s = Schedule(0.05, 2.0)
    draws = [s.delay(3, rng) for _ in range(2000)]
    assert min(draws) < 0.02 and max(draws) <= 0.4
    assert all(0 <= d <= 0.4 for d in draws)


def test_reconnect_jitter_has_a_floor_of_half_the_base() -> None:
    rng = random.Random(7)
    s = reconnect(0.05, 1.0)
    assert (s.floor, s.cap) == (0.025, 1.0)
    draws = [s.delay(0, rng) for _ in range(500)]
    assert all(0.025 <= d <= 0.05 for d in draws)


def test_without_jitter_the_delay_is_the_ceiling() -> None:
    s = Schedule(0.1, 10.0, jitter=False)
    assert [s.delay(k) for k in range(9)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]


def test_a_running_backoff_grows_and_resets() -> None:
    b = Backoff(Schedule(1.0, 100.0, jitter=False))
    assert [b.next() for _ in range(4)] == [1.0, 2.0, 4.0, 8.0]
    b.reset()
    assert b.next() == 1.0
    for _ in range(100):
        b.next()
    assert b.attempt == 30 and b.next() == 100.0
    assert Backoff().schedule == reconnect()
