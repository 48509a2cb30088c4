"""Finding jobs by order id or outbox id: a bounded scan of the streams, no index.

Redis cannot search a stream by field, and an index written beside the stream grows
with the jobs queued, not with the stream (a field per job for a day is several times
the stream's own memory), and a job added by a bare XADD (the seed's relay) is never
in it.  So a lookup reads what is there,
the job stream (at most ~maxlen entries) and the dead-letter stream (~dead_maxlen),
newest first, in slices small enough that no one command holds Redis for long:

    XREVRANGE <stream> <below the last slice> - COUNT 500

and keeps, on this side, the entries with the field value asked for (a field matches
whole: order 4471 is not 14471).  It stops once it holds `limit` matches, else at the
stream's start.  Each slice is its own round trip, so other clients' commands run
between them.

Why plain XREVRANGE and not a script that filters in Redis: a Lua filter sends only
the matches back, but turning each slice into Lua tables costs Redis far more time than
sending it, and Redis's time is what the on-sale night shares; the parsing is the
console's.  Figures and the command: docs/console.md, "Finding a job", and
docs/benchmarks.md, "Why the code is the way it is".
"""

from __future__ import annotations

import dataclasses

import redis.asyncio as aioredis

from ..telemetry.records import pipeline, text
from .deadletters import before_id

# Entries one XREVRANGE reads: well under a millisecond of Redis for the seed's five
# fields, so no one slice holds Redis for long.
SLICE = 500


@dataclasses.dataclass
class ScanCost:
    """What one lookup cost Redis: XREVRANGE calls (round trips) and entries read."""
    calls: int = 0
    entries: int = 0


def _matches(fields: list[bytes], match: list[tuple[bytes, bytes]]) -> bool:
    for i in range(0, len(fields) - 1, 2):
        for name, value in match:
            if fields[i] == name and fields[i + 1] == value:
                return True
    return False


async def find(client: aioredis.Redis, stream: str, match: list[tuple[str, str]], *,
               limit: int, cost: ScanCost | None = None) -> list[tuple[str, list[bytes]]]:
    """The newest `limit` entries of `stream` with any (field, value) of `match`, newest
    first, as (id, fields).  A missing stream is no entries.  `client` replies raw
    (client.console_client)."""
    wanted = [(name.encode(), value.encode()) for name, value in match]
    values = {value for _, value in wanted}
    found: list[tuple[str, list[bytes]]] = []
    hi = "+"
    while len(found) < limit:
        (page,) = await pipeline(client, [("XREVRANGE", stream, hi, "-", "COUNT", SLICE)])
        if isinstance(page, Exception):
            raise page
        page = list(page or [])
        if cost is not None:
            cost.calls += 1
            cost.entries += len(page)
        for eid, fields in page:
            f = list(fields or [])
            # `in` first: a C-speed look for the value before the pairwise check
            if any(v in f for v in values) and _matches(f, wanted):
                found.append((text(eid), f))
                if len(found) >= limit:
                    break
        if len(page) < SLICE:
            break  # the slice reached the stream's start
        hi = before_id(text(page[-1][0]))
    return found
