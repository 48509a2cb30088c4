"""`stagedoor dead list|show|replay|purge`: read and act on the dead-letter stream.

A dead-letter entry is the job's original fields (as a flat list, duplicates kept)
followed by dead:error, dead:source_id, dead:deliveries, dead:consumer, dead:time
(stagedoor.stream.queue).  Replay puts the original fields back on the job stream with a
new id and deletes the dead entry, in one Lua script:

    ensure the group (XGROUP CREATE ... $ MKSTREAM, BUSYGROUP is fine)
    XADD jobs MAXLEN ~ <maxlen> * <original fields>
    XDEL jobs:dead <id>                 -- only reached if the XADD succeeded

A script is atomic and stops at the first failing call, so a dead entry is never
deleted without its job back on the stream, and a retried replay of an id already
replayed finds nothing and does nothing (no duplicate job).  Both keys are passed as
KEYS; on Redis Cluster give them one hash tag, e.g. {jobs} and {jobs}:dead.

`replay --all` replays the entries present when it starts, oldest first, so a job
that dies again at once is not replayed in a loop.  `purge` deletes up to the newest
entry it counted (XTRIM MINID), so a job dead-lettered during the prompt survives.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import redis

from ... import config
from ...exitcodes import EX_USAGE
from ...ops.inspect import parse_id
from ...stream.queue import DEAD_FIELD_PREFIX
from .status import CONNECTION_SETTINGS, cli_client, unreachable

_ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
PAGE = 100

REPLAY_LUA = """
local e = redis.call('XRANGE', KEYS[2], ARGV[3], ARGV[3])
if #e == 0 then return {'missing', ''} end
local f = e[1][2]
local args = {'XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*'}
for i = 1, #f - 1, 2 do
  if string.sub(f[i], 1, 5) ~= 'dead:' then
    args[#args + 1] = f[i]
    args[#args + 1] = f[i + 1]
  end
end
if #args == 6 then return {'empty', ''} end
local g = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '$', 'MKSTREAM')
if type(g) == 'table' and g.err and string.sub(g.err, 1, 9) ~= 'BUSYGROUP' then
  return redis.error_reply(g.err)
end
local id = redis.call(unpack(args))
redis.call('XDEL', KEYS[2], ARGV[3])
return {'ok', id}
"""


def _cmd(client: redis.Redis, *args: Any) -> Any:
    untyped: Any = client  # execute_command is untyped in some redis-py stubs
    return untyped.execute_command(*args)


def _text(value: Any) -> str:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "dead", help="List, show, replay or purge dead-letter entries.",
        description="Work with the dead-letter stream: jobs that failed for good or were "
                    "poison. Replay puts a job back on the job stream; purge deletes them.")
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

    replay = sub.add_parser(
        "replay", help="put jobs back on the job stream (new id) and delete the dead entries",
        description="Put the original fields (all but dead:*) back on the job stream with a "
                    "new id (XADD MAXLEN ~ maxlen, group ensured), then delete the dead "
                    "entry, atomically in one script.")
    replay.add_argument("ids", nargs="*", default=[], type=_entry_id, metavar="ID",
                        help="dead-letter entry ids")
    replay.add_argument("--all", action="store_true",
                        help="every entry present now, oldest first (instead of IDs)")
    replay.set_defaults(func=run_replay, parser=replay)

    purge = sub.add_parser("purge", help="delete every dead-letter entry (asks first)",
                           description="Delete the dead-letter entries. Asks on a terminal; "
                                       "without a terminal it needs --yes.")
    purge.add_argument("--yes", "-y", action="store_true", help="do not ask")
    purge.set_defaults(func=run_purge)

    for leaf in (ls, show, replay, purge):
        config.add_arguments(leaf, only=(*CONNECTION_SETTINGS, "maxlen"))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _entry_id(text: str) -> str:
    if not _ENTRY_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a stream entry id like "
                                         "1758200000000-0")
    return text


# -- reading entries ----------------------------------------------------------------------

_DIGITS = re.compile(r"[0-9]{1,19}")


def _field(fields: Sequence[bytes], name: bytes) -> str | None:
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == name:
            return _text(fields[i + 1])
    return None


def _when(raw: str | None) -> str:
    try:
        stamp = float(raw or "")
    except ValueError:
        return raw or "-"
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _number(text: str | None) -> int | None:
    """An integer field as JSON's integer (as `stagedoor status --json` gives them)."""
    return int(text) if text is not None and _DIGITS.fullmatch(text) else None


def summary(entry_id: bytes | str, fields: Sequence[bytes]) -> dict[str, Any]:
    """The columns of `dead list` for one entry.

    order_id and deliveries are integers, or null when the entry's value is not one (a
    malformed job is why it is here): its text is then in order_id_raw."""
    order_id = _field(fields, b"order_id")
    row: dict[str, Any] = {
        "id": _text(entry_id),
        "time": _when(_field(fields, DEAD_FIELD_PREFIX + b"time")),
        "error": _field(fields, DEAD_FIELD_PREFIX + b"error"),
        "source_id": _field(fields, DEAD_FIELD_PREFIX + b"source_id"),
        "kind": _field(fields, b"kind"),
        "order_id": _number(order_id),
        "deliveries": _number(_field(fields, DEAD_FIELD_PREFIX + b"deliveries")),
        "consumer": _field(fields, DEAD_FIELD_PREFIX + b"consumer"),
    }
    if order_id is not None and row["order_id"] is None:
        row["order_id_raw"] = order_id
    return row


def _one(client: redis.Redis, settings: config.Settings, entry_id: str
         ) -> list[bytes] | None:
    reply = _cmd(client, "XRANGE", settings.dead_stream, entry_id, entry_id)
    return list(reply[0][1]) if reply else None


def safe(text: str) -> str:
    """The text with every control and format character escaped (\\x1b, \\u202e).

    A dead letter holds whatever was on the stream; printed raw, an escape sequence
    in it is a command to the operator's terminal (retitle, clear, recolour, or an
    OSC 52 clipboard write).  --json is left as it is: JSON escapes these itself."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def _short(text: str | None, width: int) -> str:
    """A listing cell: escaped, one line, at most `width` characters."""
    text = safe(text or "-")
    return text if len(text) <= width else text[: width - 3] + "..."


# -- actions ------------------------------------------------------------------------------


def _with_client(prog: str, args: argparse.Namespace, action: Any) -> int:
    settings = config.from_args(args)
    client = cli_client(settings)
    try:
        return int(action(client, settings))
    except (redis.ConnectionError, redis.TimeoutError) as e:
        return unreachable(prog, settings, e)
    except redis.ResponseError as e:
        print(f"{prog}: Redis error: {(str(e).splitlines() or [''])[0]}", file=sys.stderr)
        return 1
    finally:
        client.close()


def run_list(args: argparse.Namespace) -> int:
    def action(client: redis.Redis, s: config.Settings) -> int:
        total = int(_cmd(client, "XLEN", s.dead_stream))
        reply = _cmd(client, "XREVRANGE", s.dead_stream, "+", "-", "COUNT", args.count)
        rows = [summary(eid, fields) for eid, fields in reply or []]
        if args.json:
            sys.stdout.buffer.write(orjson.dumps(rows, option=orjson.OPT_APPEND_NEWLINE))
            sys.stdout.flush()
            return 0
        if not rows:
            print(f"{s.dead_stream}: no dead-letter entries")
            return 0
        print(f"{s.dead_stream}: {total} entries, newest {len(rows)} first")
        head = ("id", "time", "kind", "order_id", "source_id", "error")
        # Every cell escaped and cut: one 1 MB field must not make a 55 MB listing.
        table = [head] + [(r["id"], _short(r["time"], 20), _short(r["kind"], 24),
                           _short(str(r["order_id"] or r.get("order_id_raw") or "-"), 20),
                           _short(r["source_id"], 41), _short(r["error"], 60))
                          for r in rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
        for row in table:
            cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)]
            print("  ".join([*cells, row[-1]]))
        return 0

    return _with_client("stagedoor dead list", args, action)


def run_show(args: argparse.Namespace) -> int:
    def action(client: redis.Redis, s: config.Settings) -> int:
        fields = _one(client, s, args.id)
        if fields is None:
            print(f"stagedoor dead show: no entry {args.id} in {s.dead_stream}", file=sys.stderr)
            return 1
        pairs = [(_text(fields[i]), _text(fields[i + 1])) for i in range(0, len(fields) - 1, 2)]
        if args.json:
            doc = {"id": args.id, "fields": [list(p) for p in pairs]}
            sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE))
            sys.stdout.flush()
            return 0
        shown = [(safe(name), safe(value)) for name, value in pairs]  # whole, escaped
        width = max([len("id"), *(min(len(name), 40) for name, _ in shown)])
        print(f"{'id':<{width}}  {args.id}")
        for name, value in shown:
            print(f"{name:<{width}}  {value}")
        when = _field(fields, DEAD_FIELD_PREFIX + b"time")
        if when:
            print(f"{'(time)':<{width}}  {_when(when)}")
        return 0

    return _with_client("stagedoor dead show", args, action)


def replay_one(client: redis.Redis, settings: config.Settings, dead_id: str
               ) -> tuple[str, str | None]:
    """Replay one dead entry: ('ok', new id), ('missing', None) or ('empty', None)."""
    s = settings
    script = client.register_script(REPLAY_LUA)
    status, new_id = script(keys=[s.stream, s.dead_stream], args=[s.group, s.maxlen, dead_id])
    return _text(status), (_text(new_id) or None)


def _replay_ids(client: redis.Redis, s: config.Settings, all_: bool, ids: Sequence[str]
                ) -> list[tuple[str, list[bytes] | None]]:
    if not all_:
        return [(i, _one(client, s, i)) for i in dict.fromkeys(ids)]
    newest = _cmd(client, "XREVRANGE", s.dead_stream, "+", "-", "COUNT", 1)
    if not newest:
        return []
    end = _text(newest[0][0])
    out: list[tuple[str, list[bytes] | None]] = []
    start = "-"
    while True:
        page = _cmd(client, "XRANGE", s.dead_stream, start, end, "COUNT", PAGE)
        out += [(_text(eid), list(fields)) for eid, fields in page or []]
        if not page or len(page) < PAGE:
            return out
        start = "(" + _text(page[-1][0])


def run_replay(args: argparse.Namespace) -> int:
    if args.all == bool(args.ids):
        args.parser.error("give dead-letter entry IDs or --all (one of the two)")

    def action(client: redis.Redis, s: config.Settings) -> int:
        todo = _replay_ids(client, s, args.all, args.ids)
        if not todo:
            print(f"{s.dead_stream}: nothing to replay")
            return 0
        done = failed = 0
        for dead_id, fields in todo:
            if fields is None:
                print(f"not found  {dead_id} (no such entry in {s.dead_stream})")
                failed += 1
                continue
            status, new_id = replay_one(client, s, dead_id)
            info = summary(dead_id, fields)
            order = str(info["order_id"] or info.get("order_id_raw") or "-")
            what = f"kind {_short(info['kind'], 24)}, order_id {_short(order, 20)}"
            if status == "ok":
                done += 1
                print(f"replayed   {dead_id} -> {s.stream} {new_id} ({what})")
            elif status == "empty":
                failed += 1
                print(f"skipped    {dead_id}: no original fields to replay ({what}); "
                      "left in place")
            else:
                failed += 1
                print(f"not found  {dead_id} (gone from {s.dead_stream} meanwhile)")
        print(f"replayed {done} of {len(todo)}" + (f", {failed} not replayed" if failed else ""))
        return 0 if failed == 0 else 1

    return _with_client("stagedoor dead replay", args, action)


def run_purge(args: argparse.Namespace) -> int:
    prog = "stagedoor dead purge"
    interactive = sys.stdin.isatty()
    if not args.yes and not interactive:
        print(f"{prog}: error: refusing to delete dead letters without --yes when stdin is "
              "not a terminal", file=sys.stderr)
        return EX_USAGE

    def action(client: redis.Redis, s: config.Settings) -> int:
        count = int(_cmd(client, "XLEN", s.dead_stream))
        newest = _cmd(client, "XREVRANGE", s.dead_stream, "+", "-", "COUNT", 1)
        if not count or not newest:
            print(f"{s.dead_stream}: nothing to purge")
            return 0
        last = _text(newest[0][0])
        if not args.yes:
            answer = input(f"Delete {count} dead-letter entries from {s.dead_stream} "
                           f"(up to {last})? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("not purged")
                return 1
        ms, seq = parse_id(last)
        threshold = f"{ms}-{seq + 1}" if seq < 2**64 - 1 else f"{ms + 1}-0"
        removed = int(_cmd(client, "XTRIM", s.dead_stream, "MINID", threshold))
        print(f"purged {removed} entries from {s.dead_stream}")
        return 0

    return _with_client(prog, args, action)
