"""run_with_policy: time limit, retries with backoff and jitter, and the failure verdict.

The loop asks one question of a handler run: what to do with the entry.  DONE is
acked; DEAD goes to the dead-letter stream (and is acked there); PENDING is left on
the pending list, to be re-delivered after the claim threshold, where the delivery
count makes it poison if it keeps failing.  A cancelled run raises CancelledError
and, like a crash, acks nothing.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .config import Settings
from .metrics import WorkerStats

log = logging.getLogger("stagedoor.policy")


class TransientError(Exception):
    """Worth retrying: a timeout, a dependency away for a moment."""


class PermanentError(Exception):
    """Will fail the same way every time: dead-letter at once."""


class Verdict(enum.Enum):
    DONE = "done"
    DEAD = "dead"
    PENDING = "pending"


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    reason: str = ""
    attempts: int = 1


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None
                  ) -> float:
    """Full jitter (AWS architecture blog): uniform in [0, min(cap, base * 2**attempt)]."""
    r = rng or random
    return r.uniform(0, min(cap, base * (2 ** attempt)))


async def run_with_policy(run: Callable[[], Awaitable[None]], *, kind: str, time_limit: float,
                          settings: Settings, stats: WorkerStats,
                          extra: dict[str, object] | None = None) -> Outcome:
    """Run a handler under its time limit, retrying transient failures; return a verdict."""
    attempt = 0
    while True:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(time_limit):
                await run()
        except PermanentError as e:
            return Outcome(Verdict.DEAD, f"permanent error: {type(e).__name__}: {e}",
                           attempt + 1)
        except (TransientError, TimeoutError, OSError) as e:
            reason = (f"timed out after {time_limit:g}s" if isinstance(e, TimeoutError)
                      else f"{type(e).__name__}: {e}")
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a handler bug: retry, then leave it to the poison counter
            log.exception("handler raised", extra=extra)
            reason = f"{type(e).__name__}: {e}"
        else:
            stats.observe(kind, time.perf_counter() - started)
            return Outcome(Verdict.DONE, attempts=attempt + 1)
        stats.observe(kind, time.perf_counter() - started)
        if attempt >= settings.retries:
            return Outcome(Verdict.PENDING, reason, attempt + 1)
        stats.inc("retried", kind)
        delay = backoff_delay(attempt, settings.retry_backoff, settings.retry_backoff_max)
        log.warning("retrying in %.3fs: %s", delay, reason, extra=extra)
        attempt += 1
        await asyncio.sleep(delay)
