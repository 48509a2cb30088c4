"""`stagedoor status --kinds`: the console's Metrics tab as text or JSON.

Per job kind over the last hour, from the per-minute ring the workers write
(telemetry/kindstats.py): jobs done, failed, retried and dead-lettered, and execution time
and time in queue at P50/P95/P99 (estimated from the exporter's buckets as
Prometheus's histogram_quantile does) with their means.  One round trip, read-only.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import orjson
import redis

from ... import config
from ...console.client import console_client
from ...console.text import safe, seconds_text
from ...stream.errors import OUTAGE_ERRORS, first_line
from ...telemetry.kindstats import KindWindow, window

HEAD = ("kind", "done", "failed", "retried", "dead", "run p50", "p95", "p99", "mean",
        "queue p50", "p95", "p99", "mean")


def read(settings: config.Settings) -> KindWindow:
    async def go() -> KindWindow:
        client = console_client(settings)
        try:
            return await window(client, settings)
        finally:
            await client.aclose()
    return asyncio.run(go())


def format_kinds(w: KindWindow) -> str:
    start = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(w.first_minute * 60))
    end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(w.time_ms / 1000))
    lines = [f"last hour by kind ({start} to {end}); percentiles from the exporter's "
             "buckets, as histogram_quantile estimates them"]
    if not w.kinds:
        return "\n".join([*lines, "no job handled in the last hour"]) + "\n"
    rows = [HEAD] + [(
        safe(f.kind), f"{f.handled:,}", f"{f.failed:,}", f"{f.retried:,}",
        f"{f.dead_lettered:,}", seconds_text(f.run_p50_s), seconds_text(f.run_p95_s),
        seconds_text(f.run_p99_s), seconds_text(f.run_mean_s), seconds_text(f.wait_p50_s),
        seconds_text(f.wait_p95_s), seconds_text(f.wait_p99_s), seconds_text(f.wait_mean_s))
        for f in w.kinds]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
    lines += ["  ".join(c.ljust(wd) if i == 0 else c.rjust(wd)
                        for i, (c, wd) in enumerate(zip(r, widths, strict=True))).rstrip()
              for r in rows]
    return "\n".join(lines) + "\n"


def run_kinds(settings: config.Settings, as_json: bool) -> int:
    """Print the window; an outage is raised to status.run, which says it as status does."""
    try:
        w = read(settings)
    except OUTAGE_ERRORS:
        raise
    except redis.ResponseError as e:  # NOPERM: the ring's keys are not this user's
        print(f"stagedoor status: Redis refused: {first_line(e)}", file=sys.stderr)
        return 1
    doc: dict[str, Any] = w.to_json()
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE))
    else:
        sys.stdout.write(format_kinds(w))
    sys.stdout.flush()
    return 0
