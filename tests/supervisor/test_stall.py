"""A stall of the supervisor is not a hang of its workers (issue 37, item 2).

A supervisor can stop for longer than --heartbeat-timeout without any fault of its
workers: SIGSTOP, a blocked stderr or journald, a frozen cgroup, a debugger.  When it
resumes, the heartbeats its workers wrote meanwhile are read before they are judged,
and its own lateness is not counted as their silence:

    supervisor stopped    the workers keep running and writing heartbeats
    everything frozen     supervisor and workers stopped (a frozen cgroup), the
                          supervisor thawed first: its workers wrote nothing meanwhile

The tests run with --heartbeat-timeout 2 and stop the supervisor for 4 s.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.supervisor import enqueue, marks, supervisor, wait_for

STALLED = "loop stalled for"
HUNG = "is hung"
STOP_FOR = 4.0  # > --heartbeat-timeout 2 (tests/support/supervisor.py fast_flags)


@pytest.mark.parametrize("frozen", [False, True], ids=["supervisor-stopped", "all-frozen"])
def test_a_stalled_supervisor_keeps_its_healthy_workers(
        tmp_path: Path, redis_url: str, frozen: bool) -> None:
    """Before: both workers SIGABRTed at once as "hung (no heartbeat for 4.1s)"."""
    with supervisor(tmp_path, redis_url, ["--workers", "2"]) as sup:
        pids = sup.wait_ready(2)
        workers = list(pids.values())
        enqueue(redis_url, "noop", range(1, 21))
        wait_for(lambda: all(marks(sup, i) for i in range(1, 21)), what="jobs handled")
        sup.signal(signal.SIGSTOP)
        for pid in workers if frozen else ():
            os.kill(pid, signal.SIGSTOP)
        time.sleep(STOP_FOR)  # the fault itself: a stall longer than heartbeat_timeout
        sup.signal(signal.SIGCONT)
        if frozen:
            time.sleep(0.3)  # the supervisor thaws first and judges silent workers
            for pid in workers:
                os.kill(pid, signal.SIGCONT)
        wait_for(lambda: STALLED in sup.stderr() or HUNG in sup.stderr(), 10,
                 what="the supervisor to judge its workers after the stall")
        # the jobs after the stall are handled by the same processes
        enqueue(redis_url, "noop", range(21, 31))
        wait_for(lambda: all(marks(sup, i) for i in range(21, 31)), what="jobs after")
        assert HUNG not in sup.stderr(), sup.stderr()[-3000:]
        assert sup.ready_pids() == pids
        assert {m[1] for i in range(21, 31) for m in marks(sup, i)} <= set(workers)
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0
