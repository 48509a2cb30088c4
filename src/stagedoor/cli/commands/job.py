"""`stagedoor job ORDER_ID | --outbox-id N | --entry-id ID`: one job's story
(console/jobs.py says what it reads and what it cannot know)."""

from __future__ import annotations

import argparse
from typing import Any

import redis.asyncio as aioredis

from ... import config
from ...console import jobs
from ...console.text import human_ms, safe
from ..console_run import run_op, write_json
from .dead import _entry_id, _positive
from .status import CONNECTION_SETTINGS


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "job", help="Where is a job: queued, pending, retrying, done, dead or trimmed.",
        description="Find a job by order id, outbox id or stream entry id and tell its "
                    "story from what Redis still holds. Order and outbox ids are found "
                    "by scanning the job stream and the dead-letter stream, in slices "
                    "of 500 entries (any job still on either, however it was added).")
    p.add_argument("order_id", nargs="?", type=_positive, metavar="ORDER_ID",
                   help="the order id")
    p.add_argument("--outbox-id", type=_positive, metavar="N", help="the outbox id instead")
    p.add_argument("--entry-id", type=_entry_id, metavar="ID",
                   help="the job stream's entry id instead")
    p.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    p.set_defaults(func=run, parser=p)
    config.add_arguments(p, only=(*CONNECTION_SETTINGS, "tickets_dir"))


def _lines(e: jobs.JobEntry, now_ms: int) -> list[str]:
    out = [f"entry {e.entry_id}: {e.state.upper()}"
           + (f" ({e.note})" if e.note else ""),
           f"  queued      {e.queued_at}"
           + ("" if e.in_stream else "  (no longer in the stream: trimmed)")]
    if e.kind or e.order_id or e.outbox_id:
        out.append(f"  job         kind {safe(e.kind or '-')}, order {safe(e.order_id or '-')}, "
                   f"outbox {safe(e.outbox_id or '-')}")
    if e.consumer is not None:
        out.append(f"  pending     on {safe(e.consumer)}, idle {human_ms(e.idle_ms)}, "
                   f"delivered {e.deliveries}x" + (f", started {e.starts}x" if e.starts else ""))
    if e.last_error:
        out.append(f"  last error  {safe(e.last_error)}")
    if e.lease:
        out.append(f"  running     lease held by {safe(e.lease)}")
    if e.done_mark is not None:
        out.append(f"  done        marked done ({safe(e.done_mark)})")
    if e.dead is not None:
        out.append(f"  dead        {e.dead.id} at {safe(e.dead.time)}: "
                   f"{safe(e.dead.error or '-')}")
    elif e.dead_removed:
        out.append(f"  dead        dead letter removed ({e.dead_removed})")
    if e.ticket is not None:
        out.append(f"  ticket      {safe(e.ticket.path)}: "
                   + (f"{e.ticket.size} bytes" if e.ticket.exists else "not on this machine"))
    return out


def run(args: argparse.Namespace) -> int:
    given = [x for x in (args.order_id, args.outbox_id, args.entry_id) if x is not None]
    if len(given) != 1:
        args.parser.error("give one of ORDER_ID, --outbox-id or --entry-id")
    s = config.from_args(args)

    async def action(client: aioredis.Redis) -> int:
        story = await jobs.lookup(client, s, order_id=args.order_id, outbox_id=args.outbox_id,
                                  entry_id=args.entry_id)
        if args.json:
            write_json(story.to_json())
            return 0 if story.entries else 1
        what = (f"order {args.order_id}" if args.order_id is not None else
                f"outbox {args.outbox_id}" if args.outbox_id is not None
                else f"entry {args.entry_id}")
        if not story.entries and story.absent:
            print(f"{what}: not found: {story.absent}")
            return 1
        if not story.entries:
            print(f"{what}: not found on {s.stream} or {s.dead_stream} "
                  f"({story.scan_entries} entries read; a job trimmed from the stream "
                  f"is found by --entry-id only)" if story.searched
                  else f"{what}: not found on {s.stream} or {s.dead_stream}")
            return 1
        print(f"{what}: {len(story.entries)} "
              + ("entry" if len(story.entries) == 1 else "entries") + ", newest first")
        for e in story.entries:
            print("\n".join(_lines(e, story.time_ms)))
        return 0

    return run_op("stagedoor job", s, action)
