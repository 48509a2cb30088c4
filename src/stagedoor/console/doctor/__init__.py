"""`stagedoor doctor`: what a host needs to run stagedoor, checked, and what to do about
each thing that is missing.

Every check gives one Finding: its name, a state in the monitoring-plugin convention
(stagedoor.exitcodes.CHECK_*: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN = could not look),
one line of what it found and, unless OK, one line of what to do.  The host's part
(host.py: native renderer and the libraries it loaded, Thai dictionary, fonts, tickets
directory, systemd units, metrics port) needs no Redis; the server's part (server.py:
reachable, version floor, ACL, maxmemory policy, persistence, replication, clock) talks
to it, and keys.py looks at what stagedoor keeps in Redis besides the streams, by
family; emoji.py says whether a colour emoji font is there.  The command's exit code is
the worst state: CRITICAL, then UNKNOWN, then WARNING, then OK.  docs/doctor.md lists every check.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from ...exitcodes import CHECK_CRITICAL, CHECK_OK, CHECK_UNKNOWN, CHECK_WARNING
from ..check import STATE_NAMES

__all__ = ["Finding", "overall", "report_json", "report_text"]

# worst first: a CRITICAL outranks an UNKNOWN (something is known to be broken)
_RANK = {CHECK_CRITICAL: 3, CHECK_UNKNOWN: 2, CHECK_WARNING: 1, CHECK_OK: 0}


@dataclass(frozen=True, slots=True)
class Finding:
    check: str      # what was looked at: "redis maxmemory-policy", "tickets directory"
    state: int      # CHECK_OK .. CHECK_UNKNOWN
    found: str      # one line: what is there
    fix: str = ""   # one line: what to do (empty when OK)


def overall(findings: Iterable[Finding]) -> int:
    return max((f.state for f in findings), key=_RANK.__getitem__, default=CHECK_OK)


def _summary(findings: Sequence[Finding]) -> str:
    counts = [(STATE_NAMES[s].lower(), sum(f.state == s for f in findings))
              for s in (CHECK_CRITICAL, CHECK_UNKNOWN, CHECK_WARNING, CHECK_OK)]
    return ", ".join(f"{n} {name}" for name, n in counts if n)


def report_text(findings: Sequence[Finding]) -> str:
    """A first line for a monitoring plugin, then one line a check (and its fix)."""
    lines = [f"STAGEDOOR DOCTOR {STATE_NAMES[overall(findings)]} - {_summary(findings)}"]
    for f in findings:
        lines.append(f"{STATE_NAMES[f.state]:<9}{f.check}: {f.found}")
        if f.fix:
            lines.append(f"{'':9}-> {f.fix}")
    return "\n".join(lines) + "\n"


def report_json(findings: Sequence[Finding]) -> dict[str, object]:
    return {"state": STATE_NAMES[overall(findings)], "code": overall(findings),
            "checks": [{**asdict(f), "state": STATE_NAMES[f.state]} for f in findings]}
