"""`stagedoor pending list|show|release`: delivered, unacked entries (console/pending.py),
with their consumer, idle time, deliveries and last error; `release` hands a stuck one
to the fleet now instead of after claim_idle_ms (console/release.py, the console's twin:
what it does and what keeps it safe is told there).  Here: arguments, the dry-run
text, the question on a terminal (like `dead replay`: without one it goes on, since
it only lets a job run sooner), the audit entry, output."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import redis.asyncio as aioredis

from ... import config
from ...console import audit
from ...console import pending as console_pending
from ...console import release as console_release
from ...console.text import human_ms, safe, short
from ..console_run import confirm, print_table, run_op, write_json
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
    ls.add_argument("--scan", type=_positive, default=console_pending.SCAN_LIMIT, metavar="N",
                    help=f"pending entries read at most [default: {console_pending.SCAN_LIMIT}]")
    ls.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    ls.set_defaults(func=run_list)
    show = sub.add_parser("show", help="one pending entry with its last error",
                          description="One pending entry: consumer, idle, deliveries, "
                                      "starts, fields and its last error.")
    show.add_argument("id", type=_entry_id, metavar="ID", help="the entry id")
    show.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    show.set_defaults(func=run_show)
    rel = sub.add_parser(
        "release", help="hand a stuck pending entry to the fleet now",
        description="Set the entry's idle time past every worker's claim threshold: it "
                    "stays pending on its consumer, and the next reclaim pass of any "
                    "worker takes it and runs it (an idle worker reclaims every "
                    "block_ms). Nothing is acked or copied. Shows the entry and its "
                    "owner first and asks on a terminal. Exit 1: not pending any more, "
                    "or taken by another consumer meanwhile.")
    rel.add_argument("id", type=_entry_id, metavar="ID", help="the entry id")
    rel.add_argument("--dry-run", action="store_true",
                     help="print what would happen, touch nothing")
    rel.add_argument("--yes", "-y", action="store_true", help="do not ask")
    rel.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    rel.set_defaults(func=run_release)
    for leaf in (ls, show):
        config.add_arguments(leaf, only=CONNECTION_SETTINGS)
    config.add_arguments(rel, only=(*CONNECTION_SETTINGS, "claim_idle_ms", "audit_maxlen"))


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
        page = await console_pending.list_pending(
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
        e = await console_pending.show_pending(client, s, args.id)
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


def _plan_text(p: Any) -> str:
    """The dry-run text: which entry, who holds it, what will happen."""
    e, o = p.entry, p.owner
    if o.malformed:
        owner = f"a process writes a malformed record under this name ({safe(o.malformed)})"
    elif o.alive:
        owner = (f"alive: {safe(str(o.host))} pid {o.pid}, last beat "
                 f"{human_ms(o.seen_ms_ago or 0)} ago, {o.in_flight} jobs in flight")
    else:
        owner = "no live worker under this name"
    lines = [f"entry      {e.id} (kind {safe(e.kind or '-')}, order {safe(e.order_id or '-')})",
             f"held by    {safe(e.consumer)}: {owner}",
             f"idle       {human_ms(e.idle_ms)}, {e.deliveries} deliveries",
             "release    its idle time is set past every worker's claim threshold "
             f"(claim_idle_ms {human_ms(p.claim_idle_ms)} here): the next reclaim pass "
             "of any worker takes it and runs it; nothing is acked or copied"]
    if p.maybe_running:
        lines.append(f"warning    {safe(e.consumer)} is alive and the entry idle less than "
                     "claim_idle_ms: it may be running it now; a second run waits on the "
                     "job's lease and is skipped as done once the first ended")
    return "\n".join(lines)


def run_release(args: argparse.Namespace) -> int:
    s = config.from_args(args)
    prog = "stagedoor pending release"

    async def action(client: aioredis.Redis) -> int:
        p = await console_release.plan(client, s, args.id)
        if p is None:
            print(f"{prog}: {args.id} is not pending any more in {s.stream}/{s.group} "
                  "(acked, dead-lettered, or never delivered): nothing released",
                  file=sys.stderr)
            return 1
        if args.dry_run:
            if args.json:
                write_json({"dry_run": True, **p.to_json()})
            else:
                print(_plan_text(p))
            return 0
        if not args.yes and sys.stdin.isatty():
            print(_plan_text(p))
            if not confirm(f"Release {args.id} to the fleet now?"):
                print("not released")
                return 1
        done = await console_release.release(client, s, args.id, owner=p.entry.consumer)
        if done.status == "not-pending":
            print(f"{prog}: {args.id} is not pending any more in {s.stream}/{s.group} "
                  "(acked or dead-lettered meanwhile): nothing released", file=sys.stderr)
            return 1
        if done.status == "moved":
            print(f"{prog}: {args.id} is pending on {safe(done.consumer)} now, not on "
                  f"{safe(p.entry.consumer)}: a worker took it meanwhile; nothing released",
                  file=sys.stderr)
            return 1
        await audit.record(client, s, who=audit.cli_user(), via="cli", action="release",
                           count=1, detail=f"{args.id} from {done.consumer}")
        if args.json:
            write_json(done.to_json())
        else:
            print(f"released {args.id} (pending on {safe(done.consumer)}) to the fleet: the "
                  "next reclaim pass of a worker takes it")
        return 0

    return run_op(prog, s, action)
