"""`stagedoor status`: the queue at a glance, a table for people or --json for scripts.

Read-only: it sends only XINFO/XPENDING/XRANGE/XLEN/TIME (see stagedoor.ops.inspect).
Exit 0 when the numbers were read (a missing stream or group is reported, not an
error), 69 with one line when Redis cannot be reached, 1 when Redis answered with
something that is not our queue (WRONGTYPE on the key, say).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson
import redis

from ... import config
from ...exitcodes import EX_UNAVAILABLE
from ...ops.inspect import InspectError, queue_status
from ...stream.connection import sync_client

# Settings an operator may need to point the tool at the right queue.
CONNECTION_SETTINGS = ("redis_url", "redis_password_file", "stream", "group", "dead_stream",
                       "socket_timeout", "connect_timeout")
# An operator tool is not latency-bound: give a remote Redis a little longer than 100 ms.
MIN_CLI_TIMEOUT = 2.0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status", help="Show the queue: length, lag, pending, queue age, dead letters.",
        description="Show the job stream, its consumer group, pending entries, the age of "
                    "the oldest undelivered job, per-consumer pending/idle, the dead-letter "
                    "stream and the trimmed-backlog alarm. Read-only.")
    config.add_arguments(p, only=CONNECTION_SETTINGS)
    p.add_argument("--json", action="store_true", help="print one JSON object (for scripts)")
    p.set_defaults(func=run)


def cli_client(settings: config.Settings) -> redis.Redis:
    return sync_client(settings, timeout=max(settings.socket_timeout, MIN_CLI_TIMEOUT))


def unreachable(prog: str, settings: config.Settings, exc: BaseException) -> int:
    detail = (str(exc).splitlines() or [type(exc).__name__])[0]
    print(f"{prog}: cannot reach Redis at {config.redact_url(settings.redis_url)}: {detail}",
          file=sys.stderr)
    return EX_UNAVAILABLE


def run(args: argparse.Namespace) -> int:
    settings = config.from_args(args)
    client = cli_client(settings)
    try:
        status = queue_status(client, settings)
    except (redis.ConnectionError, redis.TimeoutError) as e:
        return unreachable("stagedoor status", settings, e)
    except InspectError as e:
        print(f"stagedoor status: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(status, option=orjson.OPT_APPEND_NEWLINE))
        sys.stdout.flush()
    else:
        sys.stdout.write(format_status(status))
    return 0


def human_ms(ms: float | None) -> str:
    """850 -> '850ms', 4200 -> '4.2s', 192000 -> '3m12s', 7380000 -> '2h03m'."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms:.0f}ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    if s < 86400:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d{int(s % 86400 // 3600):02d}h"


def _v(value: Any) -> str:
    return "-" if value is None else str(value)


def format_status(st: dict[str, Any]) -> str:
    """The status dict as a small table an operator reads at 2 a.m."""
    stream, group, pending = st["stream"], st["group"], st["pending"]
    trimmed, dead = st["trimmed_backlog"], st["dead"]
    lines: list[str] = []
    if stream["exists"]:
        lines.append(f"stream    {stream['name']}: length {stream['length']}, first "
                     f"{_v(stream['first_id'])}, last {_v(stream['last_id'])}, entries added "
                     f"{_v(stream['entries_added'])}")
    else:
        lines.append(f"stream    {stream['name']}: MISSING (no job was ever added, or the key "
                     "was deleted)")
    if group["exists"]:
        lines.append(f"group     {group['name']}: last delivered {_v(group['last_delivered_id'])}"
                     f", entries read {_v(group['entries_read'])}, lag {_v(group['lag'])}, "
                     f"consumers {group['consumers']}")
    elif stream["exists"]:
        lines.append(f"group     {group['name']}: MISSING (no worker has started on this stream)")
    else:
        lines.append(f"group     {group['name']}: MISSING")
    oldest = pending["oldest"]
    if oldest:
        lines.append(f"pending   {pending['count']}: oldest {oldest['id']} on {oldest['consumer']}"
                     f", queued {human_ms(oldest['age_ms'])} ago, idle "
                     f"{human_ms(oldest['idle_ms'])}, delivered {oldest['deliveries']}x")
    else:
        lines.append(f"pending   {pending['count']}")
    if st["oldest_undelivered_id"]:
        lines.append(f"queue age {human_ms(st['queue_age_ms'])} (oldest undelivered "
                     f"{st['oldest_undelivered_id']})")
    else:
        lines.append("queue age " + ("0 (nothing waiting)" if st["queue_age_ms"] is not None
                                     else "-"))
    if trimmed["alarm"]:
        n = trimmed["undelivered_trimmed"]
        what = f"{n} entries" if n is not None else "entries"
        lines.append(f"TRIMMED   ALARM: {what} were trimmed before the group delivered them "
                     f"(lost jobs; method {trimmed['method']})")
    else:
        lines.append("trimmed   ok (no undelivered entry was trimmed)")
    lines.append(f"dead      {dead['name']}: {dead['length']} entries"
                 + (" (see: stagedoor dead list)" if dead["length"] else ""))
    consumers = st["consumers"]
    if consumers:
        width = max(8, *(len(c["name"]) for c in consumers))
        lines.append("")
        lines.append(f"{'consumer':<{width}}  {'pending':>7}  {'idle':>8}")
        for c in consumers:
            lines.append(f"{c['name']:<{width}}  {c['pending']:>7}  {human_ms(c['idle_ms']):>8}")
    return "\n".join(lines) + "\n"
