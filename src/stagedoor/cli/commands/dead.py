"""`stagedoor dead list|show|errors|replay|delete|purge`: the dead-letter stream from
the CLI.

A thin front end over stagedoor.console.deadletters (the web page calls the same
functions): what an entry holds, the filters, and why replay is idempotent and safe
to interrupt are told there.  Here: arguments, confirmation, output.

Filters (list, replay, purge): --kind, --error (substring), --error-is (the whole error
text: one group of `dead errors`, the console's /dead/errors page), --since/--until (an
entry id, epoch ms or an ISO 8601 time, UTC unless it says otherwise).  Bulk actions count
what they would touch first: --dry-run prints it and stops; on a terminal they ask;
without one, purge (destructive) needs --yes, replay (which only puts jobs back) goes on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from ... import config
from ...console import audit
from ...console import deadletters as dl
from ...console.text import safe, short
from ...exitcodes import EX_TEMPFAIL, EX_USAGE
from ...telemetry import inspect
from ..console_run import confirm, print_table, run_op, write_json
from .status import CONNECTION_SETTINGS


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "dead", help="List, show, group, replay, delete or purge dead-letter entries.",
        description="Work with the dead-letter stream: jobs that failed for good or were "
                    "poison. Replay puts a job back on the job stream; delete and purge "
                    "remove entries.")
    sub = p.add_subparsers(dest="dead_command", metavar="ACTION", parser_class=type(p))
    sub.required = True

    ls = sub.add_parser("list", help="the newest dead-letter entries, newest first",
                        description="One line per dead-letter entry, newest first: id, "
                                    "time, error, source id, kind, order id.")
    ls.add_argument("--count", type=_positive, default=20, metavar="N",
                    help="entries to show [default: 20]")
    ls.add_argument("--json", action="store_true", help="one JSON array (for scripts)")
    ls.set_defaults(func=run_list)

    show = sub.add_parser("show", help="every field of one dead-letter entry",
                          description="Every field of one dead-letter entry, in order.")
    show.add_argument("id", type=_entry_id, metavar="ID", help="the dead-letter entry id")
    show.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    show.set_defaults(func=run_show)

    errors = sub.add_parser(
        "errors", help="the dead letters grouped by error: count, first and last seen",
        description="The dead letters counted by their whole error text, most first, with "
                    "the job kinds among them and when the first and the last of each "
                    "were dead-lettered (the console's /dead/errors page). Replay or purge "
                    "one group with --error-is TEXT (after a --dry-run).")
    errors.add_argument("--scan-limit", type=_positive, default=None, metavar="N",
                        help="read at most the newest N dead letters [default: 5000]")
    errors.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    errors.set_defaults(func=run_errors)

    replay = sub.add_parser(
        "replay", help="put jobs back on the job stream (new id) and delete the dead entries",
        description="Put the original fields (all but dead:*) back on the job stream with a "
                    "new id (XADD MAXLEN ~ maxlen, group ensured), then delete the dead "
                    "entry, atomically. Give IDs, --all, or filters; an entry replayed "
                    "twice is found missing the second time. Like enqueue, it stops at "
                    "the backlog refusal level (backlog_refuse_fraction of maxlen) and "
                    "leaves the rest in place. Exit codes: 0 all replayed, 1 some not "
                    "found or without fields, 75 stopped at the refusal level.")
    replay.add_argument("ids", nargs="*", default=[], type=_entry_id, metavar="ID",
                        help="dead-letter entry ids")
    replay.add_argument("--all", action="store_true",
                        help="every entry present now, oldest first (instead of IDs)")
    replay.set_defaults(func=run_replay, parser=replay)

    delete = sub.add_parser("delete", help="delete dead-letter entries by id",
                            description="Delete the given dead-letter entries (XDEL).")
    delete.add_argument("ids", nargs="+", type=_entry_id, metavar="ID",
                        help="dead-letter entry ids")
    delete.add_argument("--json", action="store_true", help="one JSON array (for scripts)")
    delete.set_defaults(func=run_delete)

    purge = sub.add_parser("purge", help="delete every (matching) dead-letter entry",
                           description="Delete the dead-letter entries, or those the "
                                       "filters match. Asks on a terminal; without a "
                                       "terminal it needs --yes.")
    purge.add_argument("--yes", "-y", action="store_true", help="do not ask")
    purge.set_defaults(func=run_purge, parser=purge)

    for leaf in (ls, replay, purge):
        leaf.add_argument("--kind", metavar="KIND", help="only entries of this job kind")
        leaf.add_argument("--error", metavar="TEXT",
                          help="only entries whose error contains TEXT")
        leaf.add_argument("--error-is", metavar="TEXT",
                          help="only entries whose error is TEXT, whole: one group of "
                               "`stagedoor dead errors`")
        leaf.add_argument("--since", type=_bound, metavar="WHEN",
                          help="only entries dead-lettered at or after WHEN: an entry id, "
                               "epoch ms or an ISO 8601 time (UTC unless it says)")
        leaf.add_argument("--until", type=_bound_end, metavar="WHEN",
                          help="only entries dead-lettered at or before WHEN")
    for leaf in (replay, purge):
        leaf.add_argument("--dry-run", action="store_true",
                          help="print what would be touched, touch nothing")
        leaf.add_argument("--json", action="store_true", help="JSON out (for scripts)")
    replay.add_argument("--yes", "-y", action="store_true", help="do not ask")
    for leaf in (ls, show, errors, delete, purge):
        config.add_arguments(leaf, only=(*CONNECTION_SETTINGS, "maxlen", "audit_maxlen"))
    # The producers' levels: a replay stops where enqueue refuses.
    config.add_arguments(replay, only=(*CONNECTION_SETTINGS, "maxlen", "audit_maxlen",
                                       "backlog_warn_fraction", "backlog_refuse_fraction"))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _entry_id(text: str) -> str:
    try:
        return inspect.check_id(text)
    except inspect.BadEntryId as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _bound(text: str) -> str:
    try:
        return dl.parse_bound(text)
    except dl.BadBound as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _bound_end(text: str) -> str:
    try:
        return dl.parse_bound(text, end=True)
    except dl.BadBound as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _filter(args: argparse.Namespace) -> dl.DeadFilter:
    return dl.DeadFilter(kind=args.kind, error=args.error, since=args.since, until=args.until,
                         error_is=args.error_is)


def _described(flt: dl.DeadFilter) -> str:
    """The filters of a bulk action, for its audit entry (console/audit.py)."""
    given = (("kind", flt.kind), ("error", flt.error), ("error-is", flt.error_is),
             ("since", flt.since), ("until", flt.until))
    return " ".join(f"{name}={value!r}" for name, value in given if value is not None)


# -- output ---------------------------------------------------------------------------------


def summary(entry: dl.DeadEntry) -> dict[str, Any]:
    """The columns of `dead list --json` for one entry (order_id_raw only when the
    order id is not an integer: a malformed job is why it is here)."""
    row: dict[str, Any] = {"id": entry.id, "time": entry.time, "error": entry.error,
                           "source_id": entry.source_id, "kind": entry.kind,
                           "order_id": entry.order_id, "deliveries": entry.deliveries,
                           "consumer": entry.consumer, "outbox_id": entry.outbox_id}
    if entry.order_id_raw is not None:
        row["order_id_raw"] = entry.order_id_raw
    return row


def _order(entry: dl.DeadEntry | dl.Outcome) -> str:
    if isinstance(entry, dl.Outcome):
        return entry.order_id or "-"
    return str(entry.order_id or entry.order_id_raw or "-")


# -- actions --------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        page = await dl.list_dead(client, s, _filter(args), limit=args.count)
        rows = [summary(e) for e in page.entries]
        if args.json:
            write_json(rows)
            return 0
        if not rows:
            print(f"{s.dead_stream}: no " + ("matching " if not _filter(args).empty else "")
                  + "dead-letter entries")
            return 0
        print(f"{s.dead_stream}: {page.total} entries, newest {len(rows)} "
              + ("matching " if not _filter(args).empty else "") + "first")
        head = ("id", "time", "kind", "order_id", "source_id", "error")
        # Every cell escaped and cut: one 1 MB field must not make a 55 MB listing.
        table = [head] + [(e.id, short(e.time, 20), short(e.kind, 24),
                           short(_order(e), 20), short(e.source_id, 41), short(e.error, 60))
                          for e in page.entries]
        print_table(table)
        if page.next_before and len(rows) == args.count:
            print(f"(more: older than {page.next_before})")
        return 0

    return run_op("stagedoor dead list", s, action)


def run_show(args: argparse.Namespace) -> int:
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        entry = await dl.show_dead(client, s, args.id)
        if entry is None:
            print(f"stagedoor dead show: no entry {args.id} in {s.dead_stream}", file=sys.stderr)
            return 1
        if args.json:
            write_json({"id": args.id, "fields": [list(p) for p in entry.fields]})
            return 0
        shown = [(safe(name), safe(value)) for name, value in entry.fields]  # whole, escaped
        width = max([len("id"), *(min(len(name), 40) for name, _ in shown)])
        print(f"{'id':<{width}}  {args.id}")
        for name, value in shown:
            print(f"{name:<{width}}  {value}")
        if entry.time != "-":
            print(f"{'(time)':<{width}}  {entry.time}")
        return 0

    return run_op("stagedoor dead show", s, action)


def run_errors(args: argparse.Namespace) -> int:
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        found = await dl.by_error(client, s, scan_limit=args.scan_limit or dl.SCAN_LIMIT)
        if args.json:
            write_json(found.to_json())
            return 0
        if not found.groups:
            print(f"{s.dead_stream}: no dead-letter entries")
            return 0
        read = (f"all {found.scanned} read" if found.complete else
                f"the newest {found.scanned} read (older ones not counted)")
        print(f"{s.dead_stream}: {found.total} dead letters in {len(found.groups)} error "
              f"groups; {read}, most first")
        table = [("count", "first seen", "last seen", "kinds", "error")] + [
            (str(g.count), g.first_time, g.last_time, short(", ".join(g.kinds), 40),
             short(g.error, 100)) for g in found.groups]
        print_table(table)
        print("replay or purge one group: stagedoor dead replay|purge --error-is TEXT "
              "(--dry-run first)")
        return 0

    return run_op("stagedoor dead errors", s, action)


def _print_selection(s: config.Settings, sel: dl.Selection, verb: str, as_json: bool,
                     room: dl.Room | None = None) -> None:
    if as_json:
        doc: dict[str, Any] = {"dry_run": True, "action": verb, "count": len(sel.ids),
                               "ids": sel.ids, "scanned": sel.scanned}
        if room is not None:
            doc["fit_now"] = len(sel.ids) - room.short_of(len(sel.ids))
            doc["room"] = room.to_json()
        write_json(doc)
        return
    for i in sel.ids:
        print(f"would {verb}  {i}")
    print(f"{len(sel.ids)} of {sel.scanned} entries in range would be {verb}d"
          if verb.endswith("e") else
          f"{len(sel.ids)} of {sel.scanned} entries in range would be {verb}ed")
    if room is not None and room.short_of(len(sel.ids)):
        print(_too_many(s, room, len(sel.ids)))


def _too_many(s: config.Settings, room: dl.Room, wanted: int) -> str:
    """The dry run's and the prompt's warning: the selection does not fit now."""
    return (f"warning: only {room.fits} of {wanted} fit now: {room.why(s)}; a replay "
            f"stops there (exit {EX_TEMPFAIL}) and leaves the other "
            f"{room.short_of(wanted)} in {s.dead_stream}")


def run_replay(args: argparse.Namespace) -> int:
    """Exit 0 every entry replayed; 1 some missing or without fields; 75 (EX_TEMPFAIL)
    stopped at the backlog refusal level, the rest left in place (run it again when the
    workers caught up)."""
    flt = _filter(args)
    bulk = args.all or not flt.empty
    if bulk == bool(args.ids):
        args.parser.error("give dead-letter entry IDs, or --all or filters (one of the two)")
    s = config.from_args(args)
    prog = "stagedoor dead replay"

    async def action(client: aioredis.Redis) -> int:
        ids = list(dict.fromkeys(args.ids))
        if bulk:
            sel = await dl.select(client, s, flt)
            if args.dry_run:
                _print_selection(s, sel, "replay", args.json,
                                 await dl.room(client, s, len(sel.ids)))
                return 0
            if not sel.ids:
                print(f"{s.dead_stream}: nothing to replay")
                return 0
            if not args.yes and sys.stdin.isatty():
                room = await dl.room(client, s, len(sel.ids))
                if room.short_of(len(sel.ids)):
                    print(_too_many(s, room, len(sel.ids)))
                if not confirm(f"Replay {len(sel.ids)} dead-letter entries from "
                               f"{s.dead_stream} onto {s.stream}?"):
                    print("not replayed")
                    return 1
            ids = sel.ids
        elif args.dry_run:
            found = [i for i in ids if await dl.show_dead(client, s, i) is not None]
            _print_selection(s, dl.Selection(ids=found, scanned=len(ids), newest=None),
                             "replay", args.json, await dl.room(client, s, len(found)))
            return 0
        result = await dl.replay(client, s, ids)
        outcomes, done, stopped = result.outcomes, result.done, result.stopped
        await _audit(client, s, "replay", outcomes, _described(flt) if bulk else "")
        code = EX_TEMPFAIL if stopped else 0 if done == len(outcomes) else 1
        if args.json:
            write_json({"replayed": done, "of": len(outcomes),
                        "not_replayed": len(outcomes) - done,
                        "stopped_at_refusal_level": stopped, "room": result.room.to_json(),
                        "trimmed_unread_found": result.lost,
                        "outcomes": [o.to_json() for o in outcomes]})
            return code
        for o in outcomes:
            what = f"kind {short(o.kind, 24)}, order_id {short(_order(o), 20)}"
            if o.status == "ok":
                print(f"replayed   {o.id} -> {s.stream} {o.new_id} ({what})")
            elif o.status == "empty":
                print(f"skipped    {o.id}: no original fields to replay ({what}); "
                      "left in place")
            elif o.status == "missing":
                print(f"not found  {o.id} (no such entry in {s.dead_stream})")
        failed = len(outcomes) - done
        print(f"replayed {done} of {len(outcomes)}"
              + (f", {failed} not replayed" if failed else ""))
        if result.lost:
            print(f"{prog}: {result.lost} jobs were trimmed from {s.stream} before any "
                  f"worker read them (by an earlier writer; counted now)", file=sys.stderr)
        if stopped:
            left = [o.id for o in outcomes if o.status == "full"]
            print(f"{prog}: stopped at the backlog refusal level: {result.room.why(s)}; "
                  f"{stopped} dead letters left in {s.dead_stream}, untouched ({left[0]} "
                  f"to {left[-1]}): replay them when the workers caught up", file=sys.stderr)
        return code

    return run_op(prog, s, action)


def run_delete(args: argparse.Namespace) -> int:
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        outcomes = await dl.delete(client, s, list(args.ids))
        await _audit(client, s, "delete", outcomes)
        if args.json:
            write_json([o.to_json() for o in outcomes])
        else:
            for o in outcomes:
                print(f"deleted    {o.id}" if o.status == "ok"
                      else f"not found  {o.id} (no such entry in {s.dead_stream})")
        return 0 if all(o.status == "ok" for o in outcomes) else 1

    return run_op("stagedoor dead delete", s, action)


def run_purge(args: argparse.Namespace) -> int:
    prog = "stagedoor dead purge"
    interactive = sys.stdin.isatty()
    if not args.yes and not interactive and not args.dry_run:
        print(f"{prog}: error: refusing to delete dead letters without --yes when stdin is "
              "not a terminal", file=sys.stderr)
        return EX_USAGE
    flt = _filter(args)
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        if flt.empty:  # everything: counted without reading the entries
            count, newest = await dl.extent(client, s)
            sel = dl.Selection(ids=[], scanned=count, newest=newest)
        else:
            sel = await dl.select(client, s, flt)
            count = len(sel.ids)
        if args.dry_run:
            if flt.empty:
                if args.json:
                    write_json({"dry_run": True, "action": "delete", "count": count,
                                "newest": newest})
                else:
                    print(f"{count} entries (all, up to {newest}) would be deleted")
            else:
                _print_selection(s, sel, "delete", args.json)
            return 0
        if not count:
            if args.json:
                write_json({"purged": 0})
            else:
                print(f"{s.dead_stream}: nothing to purge")
            return 0
        if not args.yes and not confirm(
                f"Delete {count} dead-letter entries from {s.dead_stream} "
                f"(up to {sel.newest})?"):
            print("not purged")
            return 1
        # Without filters: everything up to the newest entry counted (XTRIM MINID), so
        # a job dead-lettered during the prompt survives; with filters: the ids counted.
        if flt.empty:
            removed = await dl.purge(client, s, None, upto=sel.newest)
        else:
            removed = len([o for o in await dl.delete(client, s, sel.ids) if o.status == "ok"])
        await audit.record(client, s, who=audit.cli_user(), via="cli", action="purge",
                           count=removed,
                           detail=" ".join(filter(None, (_described(flt),
                                                         f"upto={sel.newest}"))))
        if args.json:
            write_json({"purged": removed})
        else:
            print(f"purged {removed} entries from {s.dead_stream}")
        return 0

    return run_op(prog, s, action)


async def _audit(client: aioredis.Redis, s: config.Settings, action: str,
                 outcomes: list[Any], filters: str = "") -> None:
    """The audit entry of a replay or delete (console/audit.py): how many, the filters of a
    bulk one, which ids."""
    done = [o.id for o in outcomes if o.status == "ok"]
    await audit.record(client, s, who=audit.cli_user(), via="cli", action=action,
                       count=len(done), detail=" ".join(filter(None, (filters, *done))))


__all__: Sequence[str] = ("register", "safe", "summary")
