"""Exponential backoff: the one schedule behind every wait-and-retry in stagedoor.

The delay for attempt k (0-based) grows as base * 2**k up to cap; with jitter it is
drawn uniformly from [floor, that ceiling].  Three users, each parameterised as it
was before they shared this code:

- the worker's reconnects (read loop, acks, dead-lettering: base 0.05 s, cap 2 s;
  boot: cap 1 s), jitter with a floor of base/2 (`reconnect`): never hammer a Redis
  that is restarting, yet come back within a couple of seconds;
- a handler's retries (worker/policy.py: retry_backoff .. retry_backoff_max), full
  jitter from 0 (the AWS architecture blog's "full jitter"), which spreads a burst of
  retries across the pool;
- the supervisor's respawns (0.1 s .. 10 s) without jitter: one process per slot,
  nothing to spread, and a kill -9 is back within 0.1 s.

Pure: no clock, no sleeping; callers sleep.  Written here rather than taken from a
library (tenacity, backoff) because the three callers need the delay, not a retry
decorator around their loops.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# 2**64 * any positive base we use is past every cap; clamping the exponent keeps the
# float arithmetic finite for attempt counters that grow without bound.
_MAX_EXPONENT = 64
_MAX_ATTEMPT = 30  # a running Backoff's counter stops here (its ceiling is the cap long before)


@dataclass(frozen=True, slots=True)
class Schedule:
    """Delays base * 2**attempt up to cap; jitter draws from [floor, that]."""

    base: float
    cap: float
    floor: float = 0.0
    jitter: bool = True

    def ceiling(self, attempt: int) -> float:
        return min(self.cap, self.base * 2.0 ** min(attempt, _MAX_EXPONENT))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        ceiling = self.ceiling(attempt)
        if not self.jitter:
            return ceiling
        return (rng or random).uniform(self.floor, ceiling)


def reconnect(base: float = 0.05, cap: float = 2.0) -> Schedule:
    """The worker's schedule for Redis being away: jitter, but never below base/2."""
    return Schedule(base, cap, floor=base / 2)


class Backoff:
    """A running backoff: next() returns the delay and grows it, reset() after a success."""

    def __init__(self, schedule: Schedule | None = None) -> None:
        self.schedule = schedule or reconnect()
        self.attempt = 0

    def next(self) -> float:
        delay = self.schedule.delay(self.attempt)
        self.attempt = min(self.attempt + 1, _MAX_ATTEMPT)
        return delay

    def reset(self) -> None:
        self.attempt = 0
