"""Worker RSS after draining: a live `stagedoor work` process (not --burst) drains a
no-op backlog, then sits in its BLOCK read; psutil reads its RSS (and USS) there."""

from __future__ import annotations

import os
import signal
import time
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


if __name__ == "__main__":
    with mc.redis_server() as server:
        print(worker_rss(server.url))
