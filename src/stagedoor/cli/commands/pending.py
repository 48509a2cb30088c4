"""`stagedoor pending list|show`: delivered, unacked entries (ops/pending.py), with
their consumer, idle time, deliveries and last error."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import redis.asyncio as aioredis

from ... import config
from ...ops import pending as ops_pending
from ...ops.text import human_ms, safe, short
from ..console_run import print_table, run_op, write_json
from .dead import _entry_id, _positive
from .status import CONNECTION_SETTINGS


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pending", help="List or show pending entries (delivered, not acked yet).",
        description="Entries a worker holds or held: running, retrying, or left by a worker "
                    "that died. With their consumer, idle time, deliveries and last error.")
    sub = p.add_subparsers(dest="pending_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    ls = sub.add_parser("list", help="pending entries, longest idle first",
                        description="Pending entries, longest idle first. Reads at most "
                                    "--scan entries of the pending list (oldest ids first).")
    ls.add_argument("--kind", metavar="KIND", help="only entries of this job kind")
    ls.add_argument("--consumer", metavar="NAME", help="only entries held by this consumer")
    ls.add_argument("--min-idle", type=_seconds, default=0, metavar="SECONDS",
                    help="only entries idle at least this long")
    ls.add_argument("--min-deliveries", type=_positive, default=1, metavar="N",
                    help="only entries delivered at least N times")
    ls.add_argument("--count", type=_positive, default=50, metavar="N",
                    help="entries to show [default: 50]")
    ls.add_argument("--scan", type=_positive, default=ops_pending.SCAN_LIMIT, metavar="N",
                    help=f"pending entries read at most [default: {ops_pending.SCAN_LIMIT}]")
    ls.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    ls.set_defaults(func=run_list)
    show = sub.add_parser("show", help="one pending entry with its last error",
                          description="One pending entry: consumer, idle, deliveries, "
                                      "starts, fields and its last error.")
    show.add_argument("id", type=_entry_id, metavar="ID", help="the entry id")
    show.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    show.set_defaults(func=run_show)
    for leaf in (ls, show):
        config.add_arguments(leaf, only=CONNECTION_SETTINGS)


def _seconds(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0 or value > 10**9:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return int(value * 1000)


def run_list(args: argparse.Namespace) -> int:
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        page = await ops_pending.list_pending(
            client, s, kind=args.kind, consumer=args.consumer, min_idle_ms=args.min_idle,
            min_deliveries=args.min_deliveries, limit=args.count, scan_limit=args.scan)
        if args.json:
            write_json(page.to_json())
            return 0
        print(f"{s.stream}/{s.group}: {page.total} pending, {len(page.entries)} shown "
              f"(longest idle first, {page.scanned} read"
              + (", more not read: raise --scan" if page.truncated else "") + ")")
        if not page.entries:
            return 0
        head = ("id", "consumer", "idle", "deliv", "kind", "order_id", "last error")
        rows = [head] + [(e.id, short(e.consumer, 30), human_ms(e.idle_ms), str(e.deliveries),
                          short(e.kind, 20), short(e.order_id, 20),
                          short(e.last_error or ("(trimmed)" if e.trimmed else ""), 70))
                         for e in page.entries]
        print_table(rows)
        return 0

    return run_op("stagedoor pending list", s, action)


def run_show(args: argparse.Namespace) -> int:
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        e = await ops_pending.show_pending(client, s, args.id)
        if e is None:
            print(f"stagedoor pending show: {args.id} is not pending in {s.stream}/{s.group}",
                  file=sys.stderr)
            return 1
        if args.json:
            write_json(e.to_json())
            return 0
        for name, value in (("id", e.id), ("consumer", e.consumer),
                            ("idle", human_ms(e.idle_ms)), ("deliveries", e.deliveries),
                            ("starts", e.starts), ("queued", human_ms(e.age_ms) + " ago"),
                            ("kind", e.kind), ("order_id", e.order_id),
                            ("outbox_id", e.outbox_id), ("in stream", not e.trimmed),
                            ("last error", e.last_error)):
            print(f"{name:<11} {safe('-' if value is None else str(value))}")
        return 0

    return run_op("stagedoor pending show", s, action)
