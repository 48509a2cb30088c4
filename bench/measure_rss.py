"""Worker RSS after draining: a live `stagedoor work` process (not --burst) drains a
backlog, then sits in its BLOCK read; psutil reads its RSS (and USS) there.

- worker_rss: a no-op backlog (the worker's own footprint);
- worker_rss_scripts: render_tickets jobs of the demo's world orders (every sample
  script: Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai, Chinese, Japanese, Korean,
  Vietnamese, mixed direction with emoji), so every face is opened and thousands of
  glyphs are cached.  Issue 11's bound is 120 MB.  Where it goes comes from
  /proc/PID/smaps: the font files' mapped pages (clean, shared with the page cache and
  given back under pressure), anonymous memory (the glyph cache, HarfBuzz's tables,
  Python), the rest.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from . import measure_common as mc


def worker_rss(url: str, n: int = 20_000, timeout: float = 120.0) -> dict[str, Any]:
    mc.fill(url, n)
    c = mc.client(url)
    proc = mc.spawn(mc.worker_cmd(url, burst=False))
    try:
        p = psutil.Process(proc.pid)
        t0 = time.monotonic()
        while True:
            info = mc.group_info(c)
            if info["entries_read"] >= n and info["pending"] == 0:
                break
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"rss: drain not done: {info}")
            time.sleep(0.05)
        time.sleep(0.5)
        mem = p.memory_full_info()
        threads = p.num_threads()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        mc.stop(proc, timeout=15)
        c.close()
    return {"n": n, "rss_mb": mem.rss / 2**20, "uss_mb": mem.uss / 2**20, "threads": threads}


FONT_SUFFIXES = (".ttf", ".ttc", ".otf", ".otc")


def smaps(pid: int) -> dict[str, float]:
    """MB of the process's resident memory by kind, from /proc/PID/smaps."""
    out = {"fonts_mb": 0.0, "anon_mb": 0.0, "other_files_mb": 0.0}
    path = ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(maxsplit=5)
            if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                path = head[5].strip() if len(head) > 5 else ""
            elif head and head[0] == "Rss:":
                kb = float(head[1])
                if path.endswith(FONT_SUFFIXES):
                    out["fonts_mb"] += kb / 1024
                elif path and path.startswith("/"):
                    out["other_files_mb"] += kb / 1024
                else:
                    out["anon_mb"] += kb / 1024
    return out


def worker_rss_scripts(url: str, orders: int = 1200, timeout: float = 300.0) -> dict[str, Any]:
    """RSS of a worker that drained render_tickets jobs of `orders` world orders."""
    from stagedoor.demo.orders import world_order
    from stagedoor.stream.job import make_job
    from stagedoor.stream.queue import enqueue_sync, ensure_group_sync
    from stagedoor.tickets.orders import put_orders_sync

    c = mc.client(url)
    c.flushall()
    s = mc.settings(url)
    work = [world_order(i + 1) for i in range(orders)]
    put_orders_sync(c, s, work)
    ensure_group_sync(c, s)
    enqueue_sync(c, s, [make_job("render_tickets", o.order_id, i + 1, f"r{i}", "t")
                        for i, o in enumerate(work)])
    with tempfile.TemporaryDirectory(prefix="sd-rss-") as tickets:
        proc = mc.spawn(mc.worker_cmd(url, burst=False, extra=["--tickets-dir", tickets]))
        try:
            p = psutil.Process(proc.pid)
            t0 = time.monotonic()
            peak = 0.0
            while True:
                info = mc.group_info(c)
                peak = max(peak, p.memory_info().rss / 2**20)
                if info["entries_read"] >= orders and info["pending"] == 0:
                    break
                if time.monotonic() - t0 > timeout:
                    raise RuntimeError(f"rss: drain not done: {info}")
                time.sleep(0.05)
            seconds = time.monotonic() - t0
            time.sleep(0.5)
            mem = p.memory_full_info()
            kinds = smaps(proc.pid)
            threads = p.num_threads()
            pdfs = len(list(Path(tickets).glob("order-*.pdf")))
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
            err = mc.stop(proc, timeout=15)
            c.close()
    if pdfs != orders:
        raise RuntimeError(f"rss: {pdfs} PDFs for {orders} orders; worker said: {err[-2000:]}")
    return {"orders": orders, "tickets": sum(len(o.tickets) for o in work),
            "scripts": sorted({o.locale or "mixed" for o in work}), "seconds": seconds,
            "rss_mb": mem.rss / 2**20, "uss_mb": mem.uss / 2**20, "pss_mb": mem.pss / 2**20,
            "peak_rss_mb": max(peak, mem.rss / 2**20), "threads": threads, **kinds}


if __name__ == "__main__":
    with mc.redis_server() as server:
        print(worker_rss(server.url))
        print(worker_rss_scripts(server.url))
