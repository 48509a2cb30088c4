"""The doctor's look at what stagedoor keeps in Redis besides the streams (issue 36).

Every key under the prefix, counted by family (ids stripped) with a SCAN that reads at
most SCAN_CALLS pages of 1,000 names (so a Redis of millions of other keys costs a
bounded number of short calls), the memory of up to SAMPLE keys a family (MEMORY USAGE)
scaled to the family, against the job stream's own memory.  OK while the total is at
most the stream's (docs/settings.md, "What Redis keeps besides the streams"); WARNING
above it, and for keys of the layouts before issue 36 (the job index's hours, done
marks as keys of their own), which expire on their own within a day and 7 days.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import redis

from ...config import Settings
from ...exitcodes import CHECK_OK, CHECK_UNKNOWN, CHECK_WARNING
from ...stream.errors import first_line
from . import Finding

SCAN_CALLS = 200
SAMPLE = 20
_ID = re.compile(r"(\{[^}]*\}|[0-9]+-[0-9]+|[0-9]+)")
_OLD = ("jobidx:", "done:")  # before issue 36: the job index, marks as keys


def family(prefix: str, key: str) -> str:
    return _ID.sub("<n>", key[len(prefix):])


def kept(admin: Any, settings: Settings) -> Finding:
    prefix = settings.key("")
    names: dict[str, list[str]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    cursor, calls, complete = 0, 0, False
    try:
        while calls < SCAN_CALLS:
            cursor, page = admin.scan(cursor=cursor, match=prefix + "*", count=1000)
            calls += 1
            for raw in page:
                key = raw.decode() if isinstance(raw, bytes) else str(raw)
                fam = family(prefix, key)
                counts[fam] += 1
                if len(names[fam]) < SAMPLE:
                    names[fam].append(key)
            if int(cursor) == 0:
                complete = True
                break
        used: dict[str, float] = {}
        for fam, sample in names.items():
            sizes = [int(admin.memory_usage(k, samples=0) or 0) for k in sample]
            used[fam] = sum(sizes) / max(1, len(sizes)) * counts[fam]
        stream = int(admin.memory_usage(settings.stream, samples=0) or 0)
    except redis.ResponseError as e:  # NOPERM: SCAN and MEMORY USAGE are an admin's
        return Finding("redis keys besides the streams", CHECK_UNKNOWN,
                       f"cannot look: {first_line(e)}",
                       "pass --admin-url (a user with +scan +memory|usage)")
    total = sum(used.values())
    top = sorted(used, key=lambda f: -used[f])[:4]
    shown = ", ".join(f"{prefix}{f} {counts[f]:,} keys {used[f] / 2**20:.1f} MiB" for f in top)
    scope = "" if complete else f" (the first {calls * 1000:,} names scanned)"
    found = (f"{total / 2**20:.1f} MiB in {sum(counts.values()):,} keys{scope}, the stream "
             f"{stream / 2**20:.1f} MiB" + (f": {shown}" if shown else ""))
    old = [f for f in counts if f.startswith(_OLD)]
    if stream and total > stream:
        fix = ("more than the stream itself: see docs/settings.md, 'What Redis keeps "
               "besides the streams' (a handler's own keys count too)")
        if old:
            fix = (f"{', '.join(prefix + f for f in old)} are of the layout before issue 36 "
                   f"and expire on their own (the job index within a day, done marks "
                   f"within idempotency_ttl); nothing writes them any more")
        return Finding("redis keys besides the streams", CHECK_WARNING, found, fix)
    return Finding("redis keys besides the streams", CHECK_OK, found)
