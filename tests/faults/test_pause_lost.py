"""A lost pause is said as lost, and the fleet stays paused (issue 37, item 8).

`stagedoor resume` records a resume in the flag's place; a flag that is simply gone was
lost with Redis's data (FLUSHDB here; a restart without persistence or an eviction
look the same to a worker).  A worker that saw the pause and then finds no flag logs
"pause flag disappeared", sets its pause_lost gauge and reads nothing until an
operator resumes.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.console import fleet
from stagedoor.stream import connection
from tests.support.faults.harness import Procs, Producer, wait_for
from tests.support.faults.invariants import Ledger, check_all

pytestmark = pytest.mark.faults


def op(s: Settings, fn: Callable[..., Awaitable[Any]], **kw: Any) -> Any:
    async def go() -> Any:
        client = connection.async_client(s)
        try:
            return await fn(client, s, **kw)
        finally:
            await client.aclose()
    return asyncio.run(go())


def test_a_pause_lost_with_the_data_keeps_the_fleet_paused_until_a_resume(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    """Before: FLUSHDB, and the workers logged "fleet resumed: reading again" (an
    operator's resume's line) and ran the jobs enqueued after it."""
    w = procs.worker(0, {"claim_idle_ms": 60_000})
    op(fsettings, fleet.pause, by="test", reason="lost-flag drill")
    w.wait_log("fleet paused by test")
    client.flushdb()
    w.wait_log("pause flag disappeared")
    producer.enqueue("ledger", [1, 2, 3])
    time.sleep(1.5)  # absence: more than a presence beat, and nothing may be read
    assert not ledger.starts(), "the workers read after their pause flag was lost"
    assert "fleet resumed" not in w.text()
    before = op(fsettings, fleet.resume, by="operator")
    assert not before.paused  # the flag was gone: the resume is recorded all the same
    w.wait_log("fleet resumed by operator: reading again")
    wait_for(lambda: {1, 2, 3} <= ledger.done(), what="jobs handled after the resume")
    # A pause after a resume takes the flag again, and a resume ends it as before.
    state = op(fsettings, fleet.pause, by="test2")
    assert state.paused and state.by == "test2"
    w.wait_log("fleet paused by test2")
    op(fsettings, fleet.resume)
    w.wait_log("fleet resumed: reading again")
    producer.enqueue("ledger", [4])
    wait_for(lambda: 4 in ledger.done(), what="a job after the second resume")
    assert w.text().count("pause flag disappeared") == 1
    w.signal(signal.SIGTERM)
    assert w.wait(20) == 0
    check_all(client, fsettings, ledger)
