"""The overview's numbers: sampled from Redis on a timer, kept in memory, shared.

One sample is telemetry.inspect.queue_status (two pipelined round trips: XINFO STREAM,
GROUPS, CONSUMERS, XPENDING summary and oldest, XLEN and GET of the dead letters, then
XRANGE and HMGET for the oldest undelivered entry and the trimmed counters) plus one
INFO (console.serverinfo) plus whatever the console layer adds for the fleet and the pause
flag: a fixed number of commands whatever the backlog.  Samples are taken every
`interval` seconds by one task, whatever the number of viewers: a page or a live
refresh reads the newest sample and sends nothing to Redis itself.

The history (the last `keep` samples) gives the rates: in = entries added per second
(XINFO STREAM entries-added), out = entries acknowledged per second (entries read by
the group minus those pending: the --watch formula, telemetry/inspect.watch_sample),
time to drain = (waiting + pending) / out, and the queue-age P95 over the history.
It is lost on restart: the console keeps no state of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ..config import Settings
from ..console.fleet import pause_state
from ..console.serverinfo import server_facts
from ..console.text import human_ms, safe
from ..telemetry.inspect import aqueue_status, watch_sample
from .quietlog import QuietLog

log = logging.getLogger("stagedoor.web")

CHART_POINTS = 120  # the chart shows the last two minutes at the default interval
CHART_W, CHART_H = 600, 140
Extra = Callable[[Any, Settings], Awaitable[Any]]


async def paused(client: Any, settings: Settings) -> dict[str, Any]:
    """The fleet's pause flag (console.fleet): one GET; since when, by whom and why."""
    return (await pause_state(client, settings)).to_json()


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover


def percentile(values: list[int], q: float) -> int | None:
    """The nearest-rank percentile of values (None for none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class Sampler:
    """Samples the queue every `interval` seconds into a bounded history."""

    def __init__(self, client: Any, settings: Settings, *, interval: float = 1.0,
                 keep: int = 600, extras: dict[str, Extra] | None = None) -> None:
        self.client = client
        self.settings = settings
        self.interval = interval
        self.history: deque[dict[str, Any]] = deque(maxlen=keep)
        self.extras = extras or {}
        self.latest: dict[str, Any] | None = None
        self.error: str | None = None
        self._task: asyncio.Task[None] | None = None
        # one line a minute while sampling fails (every `interval` otherwise); the
        # pages' outage lines count here too (app.outage), and a sample ends them
        self.quiet = QuietLog(log)

    # -- taking samples -------------------------------------------------------------------
    async def sample_once(self) -> dict[str, Any]:
        """One sample: the raw facts, the rates against the previous sample."""
        status = await aqueue_status(self.client, self.settings)
        sample: dict[str, Any] = {"status": status,
                                  "server": await server_facts(self.client, self.settings)}
        for name, fetch in self.extras.items():
            sample[name] = await fetch(self.client, self.settings)
        previous = self.history[-1]["watch"] if self.history else None
        prev_key = (previous["time_ms"] / 1000, previous["done"]) if previous else None
        sample["watch"] = watch_sample(status, prev_key)
        sample["added"] = status["stream"].get("entries_added")
        sample["in_rate"] = None
        if self.history and sample["added"] is not None:
            last = self.history[-1]
            dt = (status["time_ms"] - last["status"]["time_ms"]) / 1000
            if dt > 0 and last["added"] is not None:
                sample["in_rate"] = max(0.0, (sample["added"] - last["added"]) / dt)
        return sample

    async def refresh(self) -> None:
        try:
            sample = await self.sample_once()
        except Exception as e:  # shown on the page; the next tick tries again
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            # shown on the page and set as text by the script: escaped like every value
            self.error = safe(f"{type(e).__name__}: {first}")
            self.quiet.warning("sample", "sample failed: %s", self.error)
            return
        self.quiet.recovered("sample", "sampling again: Redis answers")
        self.quiet.recovered("outage", "Redis answers the pages again")
        self.error = None
        self.history.append(sample)
        self.latest = sample

    async def _loop(self) -> None:
        # start() follows a first refresh: sleep first, so two samples are never taken
        # milliseconds apart (a rate over a few ms of Redis time is noise)
        started = time.monotonic()
        while True:
            await asyncio.sleep(max(0.05, self.interval - (time.monotonic() - started)))
            started = time.monotonic()
            await self.refresh()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- reading them ---------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        """The overview's values, raw and as display text (the page and /api/overview)."""
        s = self.latest
        if s is None:
            return {"ready": False, "error": self.error, "text": {}, "chart": chart([])}
        st, w = s["status"], s["watch"]
        oldest = st["pending"].get("oldest") or {}
        ages = [h["status"]["queue_age_ms"] for h in self.history
                if h["status"].get("queue_age_ms") is not None]
        p95 = percentile(ages, 0.95)
        server = s.get("server") or {}
        memory = server.get("memory") or {}
        pause = s.get("paused")
        # the extra's dict (since, by, reason), or a bare flag from an older extra
        paused = pause.get("paused") if isinstance(pause, dict) else pause
        pause = pause if isinstance(pause, dict) else {}
        values: dict[str, Any] = {
            "backlog": w["waiting"], "lag": st["group"].get("lag"),
            "pending": st["pending"]["count"], "oldest_pending_age_ms": oldest.get("age_ms"),
            "queue_age_ms": st["queue_age_ms"], "queue_age_p95_ms": p95,
            "in_rate": s["in_rate"], "out_rate": w["rate"], "drain_seconds": w["drain_seconds"],
            "dead": st["dead"]["length"], "dead_trimmed": st["dead"]["trimmed"],
            "trimmed_alarm": bool(st["trimmed_backlog"]["alarm"]),
            "trimmed_unread": st["trimmed_backlog"].get("undelivered_trimmed"),
            "used_memory": memory.get("used_bytes"), "maxmemory": memory.get("maxmemory_bytes"),
            "memory_full": bool(memory.get("full")),
            "server": server.get("server"), "version": server.get("version"),
            "role": server.get("role"), "paused": paused,
            "paused_since": pause.get("since"), "paused_by": pause.get("by"),
            "paused_reason": pause.get("reason"),
            "stream_exists": st["stream"]["exists"], "group_exists": st["group"]["exists"],
            "consumers": len(st["consumers"]), "time_ms": st["time_ms"],
        }

        def rate(v: float | None) -> str:
            return "-" if v is None else f"{v:,.1f}/s"

        if paused:  # the workers read nothing: no rate says when it drains
            drain = "not while paused"
        elif w["drain_seconds"] is None:
            drain = "-" if w["rate"] is None else "never at this rate"
        else:
            drain = human_ms(w["drain_seconds"] * 1000)
        limit = values["maxmemory"]
        text = {
            "backlog": f"{values['backlog']:,}", "lag": _num(values["lag"]),
            "pending": f"{values['pending']:,}",
            "oldest_pending_age": human_ms(values["oldest_pending_age_ms"]),
            "queue_age": human_ms(values["queue_age_ms"]),
            "queue_age_p95": human_ms(p95), "in_rate": rate(values["in_rate"]),
            "out_rate": rate(values["out_rate"]), "drain": drain,
            "dead": f"{values['dead']:,}", "dead_trimmed": f"{values['dead_trimmed']:,}",
            "trimmed_alarm": ("ALARM: jobs trimmed unread" if values["trimmed_alarm"]
                              else "ok"),
            "trimmed_unread": _num(values["trimmed_unread"]),
            "memory": (f"{human_bytes(values['used_memory'])} of "
                       f"{human_bytes(limit) if limit else 'no maxmemory'}"
                       + (" (FULL: writes refused)" if values["memory_full"] else ""))
            if server else "- (INFO not allowed)",
            "server": (f"{server.get('server')} {server.get('version')} ({server.get('role')})"
                       if server else "-"),
            "paused": "-" if paused is None else ("PAUSED" if paused else "running"),
            "paused_detail": _pause_detail(pause) if paused else "",
            "consumers": str(values["consumers"]),
            "sampled": time.strftime("%H:%M:%S", time.gmtime(st["time_ms"] / 1000)) + " UTC",
        }
        return {"ready": True, "error": self.error, "values": values, "text": text,
                "chart": chart(list(self.history)[-CHART_POINTS:])}


def _pause_detail(pause: dict[str, Any]) -> str:
    """since <time> by <who>: <reason>, escaped like every page's text (the script sets
    it as text, and a direction override must not reorder it)."""
    since = pause.get("since")
    when = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since))
            if isinstance(since, int | float) and 0 <= since < 253_402_300_800 else "?")
    out = f"since {when}" + (f" by {pause['by']}" if pause.get("by") else "")
    out += f": {pause['reason']}" if pause.get("reason") else " (no reason given)"
    return safe(out, keep="")


def _num(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def chart(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The in/out rate chart as SVG polyline points (drawn by the template, redrawn by
    console.js from /api/overview: the script only copies these strings)."""
    ins = [s.get("in_rate") or 0.0 for s in samples]
    outs = [(s["watch"].get("rate") or 0.0) for s in samples]
    top = max([*ins, *outs, 1.0])
    n = max(len(samples) - 1, 1)

    def points(values: list[float]) -> str:
        return " ".join(f"{i * CHART_W / n:.1f},{CHART_H - v * (CHART_H - 4) / top:.1f}"
                        for i, v in enumerate(values))

    return {"in": points(ins), "out": points(outs), "top": f"{top:,.0f}/s",
            "width": CHART_W, "height": CHART_H}
