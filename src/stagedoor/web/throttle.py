"""The log-in throttle: how many passwords the console checks, per source and in all.

A delay per failed log-in costs a guesser nothing when the guesses run in parallel
(fifty connections, fifty guesses a delay).  So each password check takes a token
from two buckets first: the source address's (SOURCE_BURST, then one every
1/SOURCE_RATE s) and the console's (GLOBAL_BURST, then GLOBAL_RATE a second, for
guesses spread over many addresses).  With either empty the log-in is refused with
429 and Retry-After, the password not looked at; a right password gives its token
back, so only failures spend them.

The price: while someone guesses, the real user may wait for a token too, from the
same address (behind a reverse proxy every client is the proxy's address) or, at
worst, from anywhere.  That is a wait of seconds, never a lock-out, and the guesser
gets a few guesses a minute instead of hundreds a second (bench/measure_login_throttle.py,
docs/benchmarks.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

SOURCE_BURST, SOURCE_RATE = 5.0, 0.5    # tokens; tokens a second
GLOBAL_BURST, GLOBAL_RATE = 20.0, 2.0
MAX_SOURCES = 10_000  # addresses remembered; the fullest (idle longest) forgotten first
LOG_EVERY = 60.0  # seconds: refusals are logged once a minute a source, with their count


@dataclass
class Bucket:
    burst: float
    rate: float
    tokens: float
    at: float

    def _fill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now

    def wait(self, now: float) -> float:
        """Seconds until a token is there (0: one is there now)."""
        self._fill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self._fill(now)
        self.tokens -= 1

    def give(self) -> None:
        self.tokens = min(self.burst, self.tokens + 1)


class Throttle:
    def __init__(self, source_burst: float = SOURCE_BURST, source_rate: float = SOURCE_RATE,
                 global_burst: float = GLOBAL_BURST, global_rate: float = GLOBAL_RATE) -> None:
        self.source_burst, self.source_rate = source_burst, source_rate
        now = time.monotonic()
        self.all = Bucket(global_burst, global_rate, global_burst, now)
        self._sources: dict[str, Bucket] = {}
        self._refusals: dict[str, tuple[float, int]] = {}  # source -> (last logged, since)

    def acquire(self, source: str) -> float:
        """Take a token for one password check from `source`: 0.0 when taken, else the
        seconds to wait (nothing taken)."""
        now = time.monotonic()
        bucket = self._sources.get(source)
        if bucket is None:
            if len(self._sources) >= MAX_SOURCES:
                self._forget(now)
            bucket = self._sources[source] = Bucket(self.source_burst, self.source_rate,
                                                    self.source_burst, now)
        wait = max(bucket.wait(now), self.all.wait(now))
        if wait > 0:
            return wait
        bucket.take(now)
        self.all.take(now)
        return 0.0

    def refund(self, source: str) -> None:
        """A right password: the check it cost is given back."""
        self.all.give()
        bucket = self._sources.get(source)
        if bucket is not None:
            bucket.give()

    def refused(self, source: str) -> int:
        """Count a refusal; when it is time to log (the source's first, then once every
        LOG_EVERY s) the number refused since the last line, else 0: a guesser's
        thousands of refusals a second must not become as many log lines."""
        now = time.monotonic()
        logged, since = self._refusals.get(source, (-LOG_EVERY, 0))
        since += 1
        if now - logged < LOG_EVERY:
            self._refusals[source] = (logged, since)
            return 0
        if len(self._refusals) >= MAX_SOURCES:
            self._refusals.clear()
        self._refusals[source] = (now, 0)
        return since

    def _forget(self, now: float) -> None:
        """Drop the sources whose bucket is full again (they are as if new), else the
        oldest half: memory stays bounded under a flood of addresses."""
        full = [k for k, b in self._sources.items() if b.wait(now) == 0 and b.tokens >= b.burst]
        if len(full) < len(self._sources) // 2:
            full = sorted(self._sources, key=lambda k: self._sources[k].at)[
                :len(self._sources) // 2]
        for k in full:
            del self._sources[k]
