"""A worker's counters survive its crash: they live in a page shared with its supervisor
(telemetry/shared_counts.py).  A real fork, a real SIGABRT, no heartbeat at all."""

from __future__ import annotations

import faulthandler
import os
import signal

from stagedoor.telemetry.metrics import WorkerStats
from stagedoor.telemetry.shared_counts import make_page, merge, read_page, share


def test_counts_of_a_process_killed_by_sigabrt_are_read_after_its_death() -> None:
    page = make_page()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child: count, then die without a word
            stats = WorkerStats(["noop", "render_tickets"])
            share(page, stats.counters)
            handled = stats.counters["handled"]  # a reference, as the C dispatch takes
            for _ in range(7):
                handled["noop"] = handled.get("noop", 0) + 1
            stats.inc("dead_lettered", "render_tickets")
            stats.inc("reclaimed", n=3)
            stats.inc("handled", "not-registered")  # not declared at boot: not shared
            faulthandler.disable()  # pytest's, inherited: no stack dump of the fork
            os.abort()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == -signal.SIGABRT
        shared = read_page(page)
        assert shared == {"handled": {"noop": 7}, "dead_lettered": {"render_tickets": 1},
                          "reclaimed": {"": 3}}
        # the last heartbeat said less: the page wins, a larger heartbeat value stays
        last = {"counters": {"handled": {"noop": 2, "render_tickets": 4}}}
        merge(last, shared)
        assert last["counters"]["handled"] == {"noop": 7, "render_tickets": 4}
        assert last["counters"]["reclaimed"] == {"": 3}
    finally:
        page.close()


def test_a_page_never_shared_reads_empty() -> None:
    page = make_page()
    assert read_page(page) == {}
    stats: dict[str, object] = {"counters": {"handled": {"noop": 1}}}
    merge(stats, read_page(page))
    assert stats == {"counters": {"handled": {"noop": 1}}}
    page.close()
