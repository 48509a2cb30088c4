"""A randomized soak: a few thousand jobs through three worker processes while a seeded
RNG kill -9s one of them every few hundred milliseconds and the test respawns the slot
(same consumer name), as the supervisor would.  Bounded in time; prints its seed.
Re-run a failure with FAULTS_SEED=<seed>."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from tests.support.aclmode import server_args
from tests.support.faults.harness import Proc, Procs, Producer, wait_for
from tests.support.faults.invariants import Ledger, assert_idle, check_all, check_no_early_ack
from tests.support.servers import SuiteRedis as EmbeddedRedis

pytestmark = pytest.mark.faults

JOBS = 3000
SLOTS = 3
KILL_FOR = 8.0  # seconds of random kills
OPTS = {"concurrency": 8, "claim_idle_ms": 2000, "job_timeout": 1.5}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """Workers are killed here, not Redis: no AOF, so fsyncs do not slow the soak."""
    with EmbeddedRedis(tmp_path / "soak-redis", extra_args=server_args()) as s:
        yield s


def test_soak_random_kill9_of_workers_loses_nothing(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    seed = int(os.environ.get("FAULTS_SEED") or random.SystemRandom().randrange(2**32))
    print(f"\nsoak seed {seed} (FAULTS_SEED={seed} to replay the schedule)")
    rng = random.Random(seed)
    env = {"FAULTS_SLEEP_MS": "4"}
    workers: dict[int, Proc] = {k: procs.worker(k, OPTS, env=env) for k in range(SLOTS)}
    next_id = 1
    kills = 0
    started = time.monotonic()
    next_kill = started + rng.uniform(0.2, 0.8)
    while time.monotonic() - started < KILL_FOR or next_id <= JOBS:
        if next_id <= JOBS:
            n = min(rng.randint(20, 120), JOBS - next_id + 1)
            producer.enqueue("ledger", range(next_id, next_id + n))
            next_id += n
        now = time.monotonic()
        if now >= next_kill and now - started < KILL_FOR:
            slot = rng.randrange(SLOTS)
            victim = workers[slot]
            if victim.alive():
                victim.signal(signal.SIGKILL)
                victim.wait()
                kills += 1
                check_no_early_ack(client, fsettings, ledger)
            workers[slot] = procs.worker(slot, OPTS, env=env, ready=False)
            next_kill = now + rng.uniform(0.3, 1.0)
        time.sleep(0.05)  # the producer's pace, not synchronisation
    for w in workers.values():
        w.wait_log("ready")
    wait_for(lambda: len(ledger.done()) >= JOBS, 60,
             what=f"all {JOBS} jobs (seed {seed})")
    summary = check_all(client, fsettings, ledger,
                        duplicates_allowed=kills * (OPTS["concurrency"] + 10),
                        # a kill can land between the effect and mark_done of every
                        # job in flight (check-then-act), at most concurrency of them
                        effect_exists_allowed=kills * OPTS["concurrency"])
    took = time.monotonic() - started
    print(f"soak seed {seed}: {JOBS} jobs, {kills} kill -9s, {len(summary.duplicates)} jobs "
          f"ran more than once, {summary.effect_exists} side effects found applied, "
          f"{took:.1f}s")
    assert kills >= 5, "the schedule must actually kill workers"
    assert summary.handled == JOBS
    assert_idle(client, [w.pid for w in workers.values()], block_ms=200)
