"""`stagedoor pause` / `stagedoor resume`: the fleet-wide pause flag (console/fleet.py).

Paused, every worker of the stream finishes the jobs it holds, reads and reclaims
nothing new from its next heartbeat on, and keeps heartbeating; the supervisors stay
up and say `paused` in /readyz and the status file.  Resume writes a resumed record in
the flag's place (not a delete: a flag lost with Redis's data keeps the workers paused,
an operator's resume does not); the workers read again at their next heartbeat.  Both
are one entry of the audit log (console/audit.py).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis

from ... import config
from ...console import audit, fleet
from ...console.text import safe
from ..console_run import run_op, write_json
from .status import CONNECTION_SETTINGS

if TYPE_CHECKING:  # imported where they run: no cost to building the parser
    from ...stream.keys import PauseState


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pause", help="Stop the whole fleet taking new jobs (the processes stay up).",
        description="Set the fleet-wide pause flag: every worker finishes what it holds "
                    "and reads nothing new from its next heartbeat on, until `stagedoor "
                    "resume`. The flag survives restarts of workers and supervisors.")
    p.add_argument("--reason", default="", metavar="TEXT",
                   help="why (shown by stagedoor status and the web page)")
    p.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    p.set_defaults(func=run_pause)
    r = subparsers.add_parser(
        "resume", help="Let the fleet take new jobs again (ends the pause).",
        description="Record a resume in the fleet-wide pause flag's place: the workers "
                    "read again at their next heartbeat, also those that stayed paused "
                    "because the flag disappeared.")
    r.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    r.set_defaults(func=run_resume)
    for leaf in (p, r):
        config.add_arguments(leaf, only=(*CONNECTION_SETTINGS, "audit_maxlen"))


def _since(state: PauseState) -> str:
    if state.since is None:
        return "?"
    return datetime.fromtimestamp(state.since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_pause(args: argparse.Namespace) -> int:
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        state = await fleet.pause(client, s, by=audit.cli_user(), reason=args.reason)
        await audit.record(client, s, who=audit.cli_user(), via="cli", action="pause", count=1,
                           detail=args.reason)
        if args.json:
            write_json(state.to_json())
        elif state.kept_earlier:  # SET NX: the first pause stands, this reason is not kept
            print(f"{s.stream} was already paused since {_since(state)}"
                  + (f" by {safe(state.by)}" if state.by else "")
                  + (f": {safe(state.reason)}" if state.reason else "")
                  + "; that pause is kept (resume, then pause again to change its reason)")
        else:
            print(f"paused {s.stream} since {_since(state)}"
                  + (f" by {safe(state.by)}" if state.by else "")
                  + "; workers stop reading within one heartbeat")
        return 0

    return run_op("stagedoor pause", s, action)


def run_resume(args: argparse.Namespace) -> int:
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        state = await fleet.resume(client, s, by=audit.cli_user())
        await audit.record(client, s, who=audit.cli_user(), via="cli", action="resume",
                           count=1 if state.paused else 0)
        if args.json:
            write_json(state.to_json())
        elif state.paused:
            print(f"resumed {s.stream} (paused since {_since(state)}); workers read again "
                  "within one heartbeat")
        else:
            print(f"{s.stream} was not paused (resume recorded: workers whose pause flag "
                  "disappeared read again)")
        return 0

    return run_op("stagedoor resume", s, action)
