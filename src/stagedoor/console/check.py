"""`stagedoor status --check`: the queue's status judged against thresholds.

The answer follows the monitoring-plugin convention (Nagios, Icinga, Sensu, Checkmk):
one line "STAGEDOOR <STATE> - <what> | <perfdata>" and the exit code 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN (stagedoor.exitcodes.CHECK_*).  UNKNOWN is for "could not look":
Redis unreachable, or a key that is not our stream.

What is judged (the defaults are the shipped Prometheus alerts' thresholds, see
docs/monitoring.md; every one is a flag):

    trimmed backlog alarm up (jobs lost to MAXLEN)            CRITICAL
    undelivered backlog >= --crit-lag of MAXLEN (0.8)          CRITICAL
                         >= --warn-lag of MAXLEN (0.5)         WARNING
    queue age            >= --crit-age seconds (600)           CRITICAL
                         >= --warn-age seconds (60)            WARNING
    dead letters         >= --crit-dead entries (1000)         CRITICAL
                         >= --warn-dead entries (1)            WARNING
    the group is missing (no worker ever started on the stream) WARNING

A missing stream is OK (nothing was ever queued).  A pure function of the status dict
(stagedoor.telemetry.inspect) and the thresholds: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..exitcodes import CHECK_CRITICAL, CHECK_OK, CHECK_UNKNOWN, CHECK_WARNING

__all__ = ["STATE_NAMES", "Result", "Thresholds", "evaluate", "unknown"]

STATE_NAMES = {CHECK_OK: "OK", CHECK_WARNING: "WARNING", CHECK_CRITICAL: "CRITICAL",
               CHECK_UNKNOWN: "UNKNOWN"}


@dataclass(frozen=True)
class Thresholds:
    warn_age: float = 60.0
    crit_age: float = 600.0
    warn_dead: int = 1
    crit_dead: int = 1000
    warn_lag: float = 0.5
    crit_lag: float = 0.8


@dataclass
class Result:
    state: int = CHECK_OK
    problems: list[str] = field(default_factory=list)
    perfdata: list[str] = field(default_factory=list)

    def add(self, state: int, problem: str) -> None:
        self.state = max(self.state, state)
        self.problems.append(f"{STATE_NAMES[state]}: {problem}")

    def line(self) -> str:
        what = "; ".join(self.problems) or "queue healthy"
        perf = " ".join(self.perfdata)
        return f"STAGEDOOR {STATE_NAMES[self.state]} - {what}" + (f" | {perf}" if perf else "")

    def as_dict(self) -> dict[str, Any]:
        return {"state": STATE_NAMES[self.state], "code": self.state,
                "problems": self.problems, "perfdata": self.perfdata}


def unknown(reason: str) -> Result:
    result = Result(CHECK_UNKNOWN)
    result.problems.append(reason)
    return result


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.0f}s" if ms >= 10_000 else f"{ms / 1000:.1f}s"


def evaluate(status: Mapping[str, Any], maxlen: int, t: Thresholds | None = None) -> Result:
    """Judge a status dict (inspect.build_status) against the thresholds."""
    t = t or Thresholds()
    r = Result()
    stream, group, trimmed = status["stream"], status["group"], status["trimmed_backlog"]
    dead = int(status["dead"]["length"])
    age_ms = status["queue_age_ms"]
    # Counted from the stream (inspect._undelivered), not XINFO's lag: a promoted
    # Redis 7.0 replica's entries-read is stale and its lag too high for good.
    lag = status.get("undelivered", group.get("lag"))
    if trimmed.get("alarm"):
        n = trimmed.get("undelivered_trimmed")
        r.add(CHECK_CRITICAL, f"{n} jobs were trimmed before any worker took them" if n
              else "jobs were trimmed before any worker took them (how many is unknown)")
    if stream["exists"] and not group["exists"]:
        r.add(CHECK_WARNING, f"group {group['name']} missing: no worker has started on "
                             f"{stream['name']}")
    if lag is not None and maxlen > 0:
        share = lag / maxlen
        if share >= t.crit_lag:
            r.add(CHECK_CRITICAL, f"{lag} undelivered is {share:.0%} of MAXLEN {maxlen}")
        elif share >= t.warn_lag:
            r.add(CHECK_WARNING, f"{lag} undelivered is {share:.0%} of MAXLEN {maxlen}")
    if age_ms is not None:
        if age_ms >= t.crit_age * 1000:
            r.add(CHECK_CRITICAL, f"queue age {_seconds(age_ms)} >= {t.crit_age:g}s")
        elif age_ms >= t.warn_age * 1000:
            r.add(CHECK_WARNING, f"queue age {_seconds(age_ms)} >= {t.warn_age:g}s")
    ahead = int(status.get("ids_ahead_ms") or 0)
    if ahead > 0:
        what = ("queue age unknown: " if age_ms is None and status.get("oldest_undelivered_id")
                else "")
        r.add(CHECK_WARNING, f"{what}entry ids are {_seconds(ahead)} ahead of Redis' clock")
    if dead >= t.crit_dead:
        r.add(CHECK_CRITICAL, f"{dead} dead letters >= {t.crit_dead}")
    elif dead >= t.warn_dead:
        r.add(CHECK_WARNING, f"{dead} dead letters (stagedoor dead list)")
    if age_ms is not None:
        r.perfdata.append(f"queue_age={age_ms / 1000:g}s;{t.warn_age:g};{t.crit_age:g};0")
    if lag is not None:
        r.perfdata.append(f"lag={lag};{int(maxlen * t.warn_lag)};{int(maxlen * t.crit_lag)};0;"
                          f"{maxlen}")
    r.perfdata.append(f"pending={status['pending']['count']};;;0")
    r.perfdata.append(f"dead={dead};{t.warn_dead};{t.crit_dead};0")
    return r
