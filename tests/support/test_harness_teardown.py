"""The supervisor harness's teardown leaves no worker behind (tests/support/supervisor.py).

A worker left running after its test is a consumer of the suite's shared server: it
takes the next test's jobs.  That happened (README step, 2026-12-05): the test after the
console's pause-and-resume test enqueued a render job and found it dead-lettered, taken
by an orphaned worker of the test before, which had no order in the store for it.

The cause: `kill_all` recognised its workers by SUP_TEST_MARKS in /proc/<pid>/environ,
and setproctitle (proctitle.py) overwrites the environ area a forked worker inherited,
so that file is empty in every worker that set its title: no worker was ever killed,
each lived on as an orphan until it noticed its supervisor was gone.
"""

from __future__ import annotations

from pathlib import Path

import psutil

from tests.support.supervisor import Sup


def test_kill_all_leaves_no_worker_running(tmp_path: Path, redis_url: str) -> None:
    sup = Sup(tmp_path, redis_url, ["--workers", "2"]).start()
    try:
        workers = sup.wait_ready(2, timeout=30)
        procs = [psutil.Process(pid) for pid in workers.values()]
        # the harness's old test of ownership cannot see them (why this test exists)
        assert all("SUP_TEST_MARKS" not in p.environ() for p in procs)
    finally:
        sup.kill_all()
    # gone when kill_all returns (reaped or a zombie of PID 1): no orphan draining on
    alive = [p.pid for p in procs
             if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"workers left running after kill_all: {alive}"
