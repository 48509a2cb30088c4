"""A pending set left by a transient outage, cleared after the cause goes, against a
fresh drain of as many jobs, in one run (issue 24, item 5).

One supervisor, `--workers 2`, the seed's defaults but for the claim threshold
(claim_idle_ms 5000, job_timeout 4 s, so a run takes seconds, not minutes) and
retries 0; reclaim_interval and block_ms are the defaults (30 s, 5 s).  The job is
bench.noop_handlers' `outage`: it waits SD_BENCH_WORK_S (2 ms) as for a reply, or
fails transiently while the marker file exists.

  fresh      JOBS jobs enqueued to idle workers: enqueue -> all acked
  outage     the marker is created, JOBS more jobs are enqueued and all fail (left
             pending); the outage lasts claim_idle_ms + 3 s (some are taken back and
             fail again, as in a real one); the marker is removed:
               recovery_s   removal -> all acked
               wait_s       removal -> the first one acked (the claim threshold and
                            the idle worker's BLOCK: entries are taken back once idle
                            claim_idle_ms, by a worker between two reads)
               drain_s      the first one acked -> all acked

`ratio` = recovery_s / fresh_s, `drain_ratio` = drain_s / fresh_s (the rate at which
the fleet takes the pending set back, against its drain rate).  Before issue 24 a pass
took a free slot's worth per worker per reclaim_interval: 3,000 jobs at 16 a 30 s.

    .venv/bin/python -m bench.measure_recovery_pending [--jobs 3000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from stagedoor.stream.queue import enqueue_sync

from . import measure_common as mc

CLAIM_IDLE_MS = 5000
FLAGS = ["--claim-idle-ms", str(CLAIM_IDLE_MS), "--job-timeout", "4", "--retries", "0"]


def _wait(pred: Any, timeout: float, what: str, interval: float = 0.005) -> float:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError(f"recovery_pending: timed out waiting for {what}")
        time.sleep(interval)
    return time.monotonic()


def _enqueue(c: Any, url: str, first: int, n: int) -> None:
    s = mc.settings(url, maxlen=max(100_000, 4 * n))
    end = first + n
    for start in range(first, end, 5000):
        enqueue_sync(c, s, [mc.job(i, "outage") for i in range(start, min(end, start + 5000))])


def measure(url: str, jobs: int = 3000) -> dict[str, Any]:
    c = mc.client(url)
    c.flushall()
    with tempfile.TemporaryDirectory(prefix="sd-recp-") as tmp:
        marker = Path(tmp) / "outage"
        log = open(Path(tmp) / "workers.log", "wb")  # noqa: SIM115 - closed below
        sup = mc.spawn([*mc.supervise_cmd(url, 2), *FLAGS], {"SD_BENCH_OUTAGE": str(marker)},
                       stderr=log)
        try:
            _wait(lambda: int(c.info("clients")["blocked_clients"]) >= 2, 60, "2 workers")

            def settled(pending: int) -> bool:
                g = mc.group_info(c)
                return g["lag"] == 0 and g["pending"] == pending

            t0 = time.monotonic()
            _enqueue(c, url, 0, jobs)
            fresh_s = _wait(lambda: settled(0), 120, "the fresh drain") - t0
            mc.progress(f"fresh drain of {jobs}: {fresh_s:.3f} s")

            marker.touch()
            _enqueue(c, url, jobs, jobs)
            _wait(lambda: settled(jobs), 120, "every job failed once", 0.05)
            time.sleep(CLAIM_IDLE_MS / 1000 + 3)  # the outage goes on a while
            t_removed = time.monotonic()
            marker.unlink()
            t_first = _wait(lambda: mc.group_info(c)["pending"] < jobs, 120, "the first ack")
            t_end = _wait(lambda: settled(0), 300, "the pending set cleared")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(sup.pid, signal.SIGTERM)
            mc.stop(sup, timeout=30)
            log.close()
        dead = c.xlen("jobs:dead")
    c.close()
    recovery_s, wait_s, drain_s = t_end - t_removed, t_first - t_removed, t_end - t_first
    return {"jobs": jobs, "workers": 2, "claim_idle_ms": CLAIM_IDLE_MS, "fresh_s": fresh_s,
            "recovery_s": recovery_s, "wait_s": wait_s, "drain_s": drain_s,
            "ratio": recovery_s / fresh_s, "drain_ratio": drain_s / fresh_s,
            "dead_lettered": dead}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=3000)
    args = p.parse_args()
    with mc.redis_server() as server:
        print(json.dumps(measure(server.url, args.jobs), indent=1))


if __name__ == "__main__":
    main()
