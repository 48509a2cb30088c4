"""worker/settle.py: every outcome is written down in one step.  _entries.tally (its
arithmetic, in C) counts exactly what its Python spec (tests/support/settle_spec.py)
counts, for the same batches; Settle.settle queues the acks its events ask for, in
order, and no other."""

from __future__ import annotations

import random
from typing import Any

import pytest

from stagedoor.config import Settings
from stagedoor.stream.resp import FastConnection
from stagedoor.telemetry.metrics import DURATION_BUCKETS, WAIT_BUCKETS, WorkerStats
from stagedoor.worker import entries, settle
from stagedoor.worker.acks import Acker
from tests.support import settle_spec

EVENTS = [settle.DONE, settle.DONE_ACKED, settle.STARTED, settle.RETRIED, settle.FAILED,
          settle.DEAD, settle.ENDED, settle.DELETED, settle.DELETED_ACKED, settle.ACK]
EDGES = [0.0, -1.0, *WAIT_BUCKETS, *DURATION_BUCKETS, 1e9]  # on and around the bounds


def batch(seed: int, n: int) -> list[Any]:
    rng = random.Random(seed)
    out: list[Any] = []
    for i in range(n):
        wait = rng.choice([None, rng.choice(EDGES), rng.uniform(-0.5, 30)])
        took = rng.choice([None, rng.choice(EDGES[1:]), rng.uniform(0, 30)])
        # runs of one kind, as a reply has, and kinds that are equal but not the same str
        kind = rng.choice(["noop", "noop", "".join(["no", "op"]), "render", ""])
        out += [f"{i}-0".encode(), kind, rng.choice(EVENTS), wait, took]
    return out


def snapshot(stats: WorkerStats) -> dict[str, Any]:
    snap = stats.snapshot()
    snap["counters"] = {k: {kind: n for kind, n in v.items() if n}
                        for k, v in snap["counters"].items()}
    return snap


@pytest.mark.parametrize("seed", range(20))
def test_tally_in_c_counts_what_its_spec_counts(seed: int) -> None:
    records = batch(seed, 1 + seed * 7)
    c, py = WorkerStats(["noop"]), WorkerStats(["noop"])
    c_acks: list[bytes] = []
    py_acks: list[bytes] = []
    entries.tally(records, c, c_acks)
    settle_spec.tally(records, py, py_acks)
    assert c_acks == py_acks
    got, want = snapshot(c), snapshot(py)
    assert got["counters"] == want["counters"]
    for rows in ("durations", "waits"):
        assert got[rows].keys() == want[rows].keys()
        for kind, row in want[rows].items():
            assert got[rows][kind][:-1] == row[:-1], (rows, kind)
            assert got[rows][kind][-1] == pytest.approx(row[-1]), (rows, kind)


def test_tally_refuses_a_batch_that_is_not_whole_outcomes() -> None:
    with pytest.raises(ValueError):
        entries.tally([b"1-0", "noop", settle.DONE, None], WorkerStats(), [])


def test_settle_queues_the_acks_of_the_events_that_ask_for_them(settings: Settings) -> None:
    stats = WorkerStats(["noop"])
    acker = Acker(FastConnection(settings, timeout=1.0), settings)  # never connected
    step = settle.Settle(stats, acker)
    step.settle([b"1-0", "noop", settle.DONE, 0.1, 0.002,
                 b"2-0", "noop", settle.DEAD, None, None,
                 b"3-0", "noop", settle.DONE_ACKED, None, 0.003,
                 b"4-0", "", settle.DELETED, None, None,
                 b"5-0", "", settle.ACK, None, None])
    step.settle([b"6-0", "noop", settle.STARTED, 0.2, None])  # nothing to ack: no call
    assert acker.queued == [b"1-0", b"4-0", b"5-0"]
    counters = stats.counters
    assert (counters["handled"]["noop"], counters["dead_lettered"]["noop"],
            counters["deleted"][""]) == (2, 1, 1)
    assert sum(stats.waits["noop"][:-2]) + stats.waits["noop"][-2] == 2
