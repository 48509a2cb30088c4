"""The job stream deleted under blocked workers (issue 24, item 4).

`DEL jobs` or `FLUSHDB` while the workers block in XREADGROUP: Redis 7.0 answers the
blocked read with "UNBLOCKED the stream key no longer exists" (Valkey 8 and Redis 8:
NOGROUP).  Before, each worker logged a traceback and exited 70, and a few of those
tripped the supervisor's flap limit.  Now it is a missing group, as after XGROUP
DESTROY: one line, the group recreated (MKSTREAM), and the jobs enqueued afterwards
are handled by the same processes.
"""

from __future__ import annotations

import psutil
import pytest
import redis

from stagedoor.config import Settings
from tests.support.faults.harness import Proc, Procs, Producer, wait_for
from tests.support.faults.invariants import Ledger, check_all

pytestmark = pytest.mark.faults

GONE = "is gone"


def gone_lines(sup: Proc) -> int:
    return sum(1 for ln in sup.log_lines() if GONE in ln.get("msg", ""))


def test_del_and_flushdb_under_blocked_workers_keep_every_worker_running(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    # A long BLOCK: the workers are inside their blocking read when the stream goes.
    sup = procs.supervisor(2, {"block_ms": 5000})
    for k in range(2):
        sup.wait_log(f"worker f-{k:02d} ready")
    pids = sorted(c.pid for c in psutil.Process(sup.pid).children())
    assert len(pids) == 2
    producer.enqueue("ledger", range(1, 11))
    wait_for(lambda: ledger.done() >= set(range(1, 11)), what="jobs before")

    rounds = [("DEL", lambda: client.delete(fsettings.stream)),
              ("FLUSHDB", client.flushdb)]
    offset = 10
    for what, act in rounds:
        def blocked() -> bool:
            clients = client.client_list()
            return sum(1 for c in clients if c.get("name", "").endswith(":read")
                       and c.get("cmd") == "xreadgroup") >= 2
        wait_for(blocked, what=f"both workers blocked before {what}")
        before = gone_lines(sup)
        act()
        # One line per worker, not a traceback and an exit.
        wait_for(lambda b=before: gone_lines(sup) >= b + 2, what=f"both workers saw {what}")
        ids = range(offset + 1, offset + 11)
        producer.enqueue("ledger", ids)
        wait_for(lambda ids=ids: ledger.done() >= set(ids), 30, what=f"jobs after {what}")
        offset += 10

    text = sup.text()
    assert "Traceback" not in text, text[-3000:]
    assert "exited" not in text and "died" not in text, text[-3000:]
    assert sorted(c.pid for c in psutil.Process(sup.pid).children()) == pids
    assert gone_lines(sup) == 4, "one line per worker and deletion"
    # Jobs are handled once each; nothing was left pending.
    check_all(client, fsettings, ledger)
    sup.signal(15)
    assert sup.wait(20) == 0
