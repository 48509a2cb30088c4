"""The console's Metrics tab (/kinds): per-kind figures of the last hour (telemetry/kindstats.py).

Real servers throughout: the ring is written by real workers (a supervisor draining jobs
of two kinds, one that fails on purpose) and read by the real `stagedoor web`; the
page's numbers are checked against what ran (the handlers' own marks: when each job
started and ended).  The percentile estimate is checked against Prometheus's
histogram_quantile on hand-made buckets, and the ring's bound by writing two hours.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import Settings
from stagedoor.stream.keys import kinds_key
from stagedoor.telemetry import kindstats
from stagedoor.telemetry.kindstats import SLOTS, Flusher, histogram_quantile
from stagedoor.telemetry.metrics import DURATION_BUCKETS, WAIT_BUCKETS, WorkerStats
from tests.support.cli import cli
from tests.support.supervisor import Sup, enqueue, wait_for
from tests.support.web import console
from tests.web.test_web import Http

pytestmark = [pytest.mark.timeout(180)]


def test_histogram_quantile_is_prometheus_s() -> None:
    # buckets le=1, le=2, le=4, +Inf with 1, 2, 1, 0 observations (cumulative 1, 3, 4, 4)
    bounds, counts = (1.0, 2.0, 4.0), [1, 2, 1, 0]
    assert histogram_quantile(0.25, bounds, counts) == 1.0     # rank 1: top of le=1
    assert histogram_quantile(0.5, bounds, counts) == 1.5      # rank 2: half into (1, 2]
    assert histogram_quantile(0.95, bounds, counts) == pytest.approx(3.6)  # (2, 4] at .8
    assert histogram_quantile(0.1, bounds, counts) == pytest.approx(0.4)  # (0, 1] at .4
    # a rank among +Inf's: the highest finite bound, as Prometheus answers
    assert histogram_quantile(0.99, bounds, [0, 0, 1, 3]) == 4.0
    assert histogram_quantile(0.5, bounds, [0, 0, 0, 0]) is None
    # empty buckets below the rank are skipped, never interpolated into
    assert histogram_quantile(0.5, bounds, [0, 0, 2, 0]) == 3.0


async def test_the_ring_is_sixty_keys_and_keeps_the_last_hour(
        settings: Settings, aredis: aioredis.Redis) -> None:
    stats = WorkerStats(["noop"])
    flusher = Flusher(settings, stats)
    now = time.time()
    for ago in range(2 * SLOTS + 10, -1, -1):  # two hours and ten minutes, a job a minute
        stats.inc("handled", "noop")
        stats.observe("noop", 0.003)
        stats.observe_wait("noop", 0.2)
        assert await flusher.flush(aredis, now - ago * 60)
    assert not await flusher.flush(aredis, now)  # nothing new: nothing sent
    keys = [k async for k in aredis.scan_iter(match="stagedoor:kinds:*")]
    assert len(keys) == SLOTS
    w = await kindstats.window(aredis, settings)
    [noop] = w.kinds
    # the minutes of the last hour: this one and the 59 before
    assert noop.handled == SLOTS and noop.runs == SLOTS and noop.waited == SLOTS
    assert noop.per_minute_handled == [1] * SLOTS
    assert 0.0025 < (noop.run_p50_s or 0) <= 0.005 and 0.1 < (noop.wait_p99_s or 0) <= 0.25
    assert noop.run_mean_s == pytest.approx(0.003) and noop.wait_mean_s == pytest.approx(0.2)


def _seconds(text: str) -> float:
    """The page's '37.5 ms', '420 µs', '2.50 s' back to seconds."""
    m = re.fullmatch(r"([0-9.]+) (µs|ms|s)", text.strip())
    assert m, text
    return float(m[1]) * {"µs": 1e-6, "ms": 1e-3, "s": 1.0}[m[2]]


def _cells(page: str, kind: str) -> dict[str, str]:
    row = re.search(rf'<tr data-kind="{kind}">(.*?)</tr>', page, re.S)
    assert row, page[-3000:]
    return {m[1]: m[2].strip() for m in re.finditer(r'<td class="(?:count )?([a-z0-9-]+)">'
                                                    r"([^<]*)</td>", row[1])}


def _buckets(bounds: tuple[float, ...], value: float, slack: float) -> set[int]:
    """The buckets a measurement within `slack` of `value` may fall in: the marks are
    written inside the handler, the worker's clock runs around it."""
    return {bisect.bisect_left(bounds, max(0.0, value + d)) for d in (-slack, 0.0, slack)}


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _bucket_of(bounds: tuple[float, ...], shown: float) -> int:
    # the estimate lies in its bucket, its top included (rounded as the page shows it)
    for i, top in enumerate(bounds):
        if shown <= top * 1.001:
            return i
    return len(bounds)


def test_the_page_shows_what_two_kinds_did(tmp_path: Path, redis_url: str) -> None:
    slow_ids = enqueue(redis_url, "slow", range(1, 41))
    refuse_ids = enqueue(redis_url, "refuse", range(1001, 1008))
    added = {**{i: e for i, e in zip(range(1, 41), slow_ids, strict=True)},
             **{i: e for i, e in zip(range(1001, 1008), refuse_ids, strict=True)}}
    (tmp_path / "sup").mkdir()
    sup = Sup(tmp_path / "sup", redis_url, ["--workers", "2", "--concurrency", "4"],
              env={"SUP_TEST_SLOW": "0.035"}).start()
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        # every job ran: 40 done marks, 7 refusals
        def ran() -> bool:
            text = "".join(p.read_text() for p in sup.marks.glob("*.log"))
            return text.count("done ") == 40 and text.count("refused ") == 7
        wait_for(ran, 60, what="40 slow jobs done and 7 refused")
        (tmp_path / "web").mkdir()
        with console(tmp_path / "web", redis_url) as c:
            h = Http(c.url)
            h.log_in("viewer")  # a viewer may read it

            def shown() -> str | None:
                status, _, body = h.request("GET", "/kinds")
                assert status == 200
                page = body.decode()
                ok = ('data-kind="slow"' in page and 'data-kind="refuse"' in page
                      and _cells(page, "slow")["handled"] == "40"
                      and _cells(page, "refuse")["dead"] == "7")
                return page if ok else None
            page = wait_for(shown, 20, what="the page to count every job")
            # the nav links the tab
            assert '<a href="/kinds"' in page
            # the CLI twin reads the same ring: the same figures, as text and JSON
            text = cli("status", "--kinds", "--redis-url", redis_url)
            as_json = cli("status", "--kinds", "--json", "--redis-url", redis_url)
    finally:
        sup.kill_all()
        client.close()
    slow, refuse = _cells(page, "slow"), _cells(page, "refuse")
    assert (slow["handled"], slow["failed"], slow["retried"], slow["dead"]) == \
        ("40", "0", "0", "0")
    # a PermanentError dead-letters at once: not "failed" (out of retries, left pending)
    assert (refuse["handled"], refuse["failed"], refuse["retried"], refuse["dead"]) == \
        ("0", "0", "0", "7")
    # what ran, from the handlers' marks: each job's start and end, its entry's time
    runs: dict[str, list[float]] = {"slow": [], "refuse": []}
    waits: dict[str, list[float]] = {"slow": [], "refuse": []}
    for outbox, entry_id in added.items():
        events = dict(line.split()[0::2][:2] for line in
                      (sup.marks / f"{outbox}.log").read_text().splitlines())
        kind = "slow" if outbox < 1000 else "refuse"
        end = float(events["done" if kind == "slow" else "refused"])
        runs[kind].append(end - float(events["start"]))
        waits[kind].append(float(events["start"]) - int(entry_id.split("-")[0]) / 1000)
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    doc = {k["kind"]: k for k in json.loads(as_json.stdout)["kinds"]}
    assert (doc["slow"]["handled"], doc["refuse"]["dead_lettered"]) == (40, 7)
    rows = {line.split()[0]: line.split() for line in text.stdout.splitlines()[2:]}
    assert rows["slow"][1:5] == ["40", "0", "0", "0"]
    assert rows["refuse"][1:5] == ["0", "0", "0", "7"]
    assert " ".join(rows["slow"][5:7]) == slow["run-p50"]
    for kind, cells in (("slow", slow), ("refuse", refuse)):
        for q, tag in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
            for what, bounds, measured, slack in (
                    ("run", DURATION_BUCKETS, runs[kind], 0.004),
                    ("wait", WAIT_BUCKETS, waits[kind], 0.01)):
                value = _seconds(cells[f"{what}-{tag}"])
                actual = _nearest_rank(measured, q)
                assert _bucket_of(bounds, value) in _buckets(bounds, actual, slack), \
                    (kind, what, tag, value, actual)
        assert _seconds(cells["run-mean"]) == pytest.approx(
            sum(runs[kind]) / len(runs[kind]), abs=0.004)


def test_a_stopping_worker_adds_what_it_did_since_its_last_beat(tmp_path: Path,
                                                               redis_url: str) -> None:
    """A beat every 30 s: the jobs handled after the boot's beat reach the ring only
    through the flush after the drain, at a graceful stop (worker/loop.py)."""
    import signal

    settings = Settings(redis_url=redis_url)
    sup = Sup(tmp_path, redis_url, ["--workers", "1", "--heartbeat-interval", "30",
                                    "--heartbeat-timeout", "120"]).start()
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        sup.wait_ready(1, timeout=30)
        enqueue(redis_url, "noop", range(1, 6))
        wait_for(lambda: len(list(sup.marks.glob("*.log"))) == 5, 30, what="5 jobs done")

        def handled() -> int:
            return sum(int(client.hget(kinds_key(settings, i), "noop|h") or 0)
                       for i in range(SLOTS))
        assert handled() == 0  # no beat since the jobs ran
        sup.signal(signal.SIGTERM)
        assert sup.wait(60) == 0, sup.stderr()[-3000:]
        assert handled() == 5
    finally:
        sup.kill_all()
        client.close()
