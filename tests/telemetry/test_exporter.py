"""render_metrics and MetricsEndpoint: text exposition, sums, and a real HTTP scrape."""

from __future__ import annotations

import re
import select
import selectors
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from stagedoor.config import Settings
from stagedoor.stream.connection import async_client, sync_client
from stagedoor.telemetry.endpoint import MetricsBindError, MetricsEndpoint, Probe
from stagedoor.telemetry.exporter import (
    CONTENT_TYPE,
    build_labels,
    empty_totals,
    render_metrics,
    retire,
)
from stagedoor.telemetry.inspect import aqueue_status
from stagedoor.telemetry.metrics import DURATION_BUCKETS, WorkerStats
from tests.support.prometheus import samples


def value(text: bytes, name: str, stream: str = "jobs", **labels: str) -> float:
    """The sample with exactly these labels; every sample carries the stream's name."""
    return samples(text)[(name, tuple(sorted({"stream": stream, **labels}.items())))]


def stats(handled: int, kind: str = "render_tickets", durations: tuple[float, ...] = (),
          in_flight: int = 0) -> WorkerStats:
    s = WorkerStats()
    s.inc("handled", kind, handled)
    for d in durations:
        s.observe(kind, d)
    s.gauges["in_flight"] = in_flight
    return s


# -- render_metrics ---------------------------------------------------------------------------


def test_sums_live_workers_and_retired_totals() -> None:
    a = stats(3, durations=(0.0004, 0.003), in_flight=2)
    a.inc("failed", "render_tickets")
    a.inc("deleted", "")
    b = stats(5, durations=(0.2, 99.0), in_flight=1)
    b.inc("handled", "send_email", 7)
    gone = stats(11, durations=(0.003,))
    gone.gauges["in_flight"] = 8  # a dead worker's gauges must not count
    retired = retire(empty_totals(), gone.snapshot())
    text = render_metrics({0: a.snapshot(), 1: b.snapshot()}, retired, None, restarts=4)

    assert value(text, "stagedoor_jobs_handled_total", kind="render_tickets") == 3 + 5 + 11
    assert value(text, "stagedoor_jobs_handled_total", kind="send_email") == 7
    assert value(text, "stagedoor_jobs_failed_total", kind="render_tickets") == 1
    assert value(text, "stagedoor_jobs_deleted_total", kind="") == 1
    assert value(text, "stagedoor_in_flight") == 3
    assert value(text, "stagedoor_worker_restarts_total") == 4
    assert value(text, "stagedoor_workers_alive") == 2
    assert value(text, "stagedoor_queue_status_available") == 0
    names = {name for name, _ in samples(text)}
    for counter in ("handled", "failed", "retried", "dead_lettered", "reclaimed", "deleted",
                    "duplicates"):
        assert f"# TYPE stagedoor_jobs_{counter}_total counter" in text.decode()
    assert "stagedoor_queue_age_seconds" not in names  # unknown, so not a fake 0

    # Histogram: cumulative buckets, +Inf, count and sum over all three workers.
    h = "stagedoor_handler_duration_seconds"
    kind = "render_tickets"
    assert value(text, h + "_bucket", kind=kind, le="0.0005") == 1
    assert value(text, h + "_bucket", kind=kind, le="0.005") == 3  # 0.0004, 0.003, 0.003
    assert value(text, h + "_bucket", kind=kind, le="0.25") == 4
    assert value(text, h + "_bucket", kind=kind, le="30.0") == 4
    assert value(text, h + "_bucket", kind=kind, le="+Inf") == 5
    assert value(text, h + "_count", kind=kind) == 5
    assert value(text, h + "_sum", kind=kind) == pytest.approx(0.0004 + 0.003 + 0.2 + 99 + 0.003)
    les = [k[1] for k in samples(text) if k[0] == h + "_bucket" and ("kind", kind) in k[1]]
    assert len(les) == len(DURATION_BUCKETS) + 1


def test_counters_never_go_backwards_when_a_worker_is_replaced() -> None:
    retired = empty_totals()
    old = stats(10)
    workers: dict[int, dict[str, Any]] = {0: old.snapshot(), 1: stats(1).snapshot()}
    before = value(render_metrics(workers, retired, None, 0), "stagedoor_jobs_handled_total",
                   kind="render_tickets")
    retire(retired, workers.pop(0))          # slot 0 died; its last snapshot is kept
    workers[0] = WorkerStats().snapshot()    # the respawned worker starts at zero
    after = value(render_metrics(workers, retired, None, 1), "stagedoor_jobs_handled_total",
                  kind="render_tickets")
    assert before == after == 11
    workers[0] = stats(2).snapshot()
    later = value(render_metrics(workers, retired, None, 1), "stagedoor_jobs_handled_total",
                  kind="render_tickets")
    assert later == 13


def test_malformed_snapshots_are_ignored() -> None:
    bad: dict[str, Any] = {"counters": {"handled": {"x": "many"}, "weird": 3},
                           "durations": {"x": [1, 2]}, "gauges": {"in_flight": float("nan")}}
    text = render_metrics({0: bad, 1: stats(1).snapshot()}, {}, None, 0,
                          extra_gauges={"uptime_seconds": 5, "workers_alive": 99})
    assert value(text, "stagedoor_jobs_handled_total", kind="render_tickets") == 1
    assert ("stagedoor_jobs_handled_total", (("kind", "x"), ("stream", "jobs"))
            ) not in samples(text)
    assert value(text, "stagedoor_in_flight") == 0
    assert value(text, "stagedoor_uptime_seconds") == 5
    assert value(text, "stagedoor_workers_alive") == 2  # an extra may not shadow ours


async def test_queue_gauges_from_a_real_status(settings: Settings) -> None:
    sync = sync_client(settings)
    try:
        sync.execute_command("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
        sec, usec = sync.time()
        now = int(sec) * 1000 + int(usec) // 1000
        sync.execute_command("XADD", "jobs", f"{now - 5000}-0", "kind", "a")
        for _ in range(4):
            sync.execute_command("XADD", "jobs", "*", "kind", "a")
        sync.execute_command("XREADGROUP", "GROUP", "workers", "w", "COUNT", 2, "STREAMS",
                             "jobs", ">")
        sync.execute_command("XADD", "jobs:dead", "*", "kind", "a", "dead:error", "e")
    finally:
        sync.close()
    client = async_client(settings)
    try:
        status = await aqueue_status(client, settings)
        text = render_metrics({}, None, status, 0)
        assert value(text, "stagedoor_stream_length") == 5
        assert value(text, "stagedoor_pending") == 2
        assert value(text, "stagedoor_lag") == 3
        assert value(text, "stagedoor_dead_letter_length") == 1
        assert value(text, "stagedoor_trimmed_backlog") == 0
        assert 0 <= value(text, "stagedoor_queue_age_seconds") < 2
        assert 5 <= value(text, "stagedoor_oldest_pending_age_seconds") < 7
        assert value(text, "stagedoor_queue_status_available") == 1
        assert value(text, "stagedoor_queue_status_timestamp_seconds") == status["time_ms"] / 1000

        await client.execute_command("XTRIM", "jobs", "MAXLEN", 0)
        text = render_metrics({}, None, await aqueue_status(client, settings), 0)
        assert value(text, "stagedoor_trimmed_backlog") == 1
        assert value(text, "stagedoor_trimmed_undelivered_entries") == 3
        assert value(text, "stagedoor_stream_length") == 0
    finally:
        await client.aclose()


def test_render_and_endpoint_start_no_thread() -> None:
    before = threading.active_count()
    with MetricsEndpoint("127.0.0.1", 0):
        render_metrics({0: stats(1).snapshot()}, None, None, 0)
        assert threading.active_count() == before


# -- the endpoint --------------------------------------------------------------------------------


class Loop:
    """The supervisor's part: a selectors loop calling on_event and tick (in a test thread)."""

    def __init__(self, endpoint: MetricsEndpoint, render: Callable[[], bytes]) -> None:
        self.endpoint = endpoint
        self.render = render
        self.stop = threading.Event()
        self.served = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with selectors.DefaultSelector() as sel:
            self.endpoint.attach(sel)
            while not self.stop.is_set():
                for key, mask in sel.select(min(0.05, self.endpoint.wait_time())):
                    kind, conn = key.data
                    assert kind == "metrics"
                    self.served += conn is None
                    self.endpoint.on_event(conn, mask, self.render)
                self.endpoint.tick(self.render)
            self.endpoint.close()


@pytest.fixture
def served() -> Iterator[Callable[[Callable[[], bytes]], MetricsEndpoint]]:
    loops: list[Loop] = []

    def start(render: Callable[[], bytes]) -> MetricsEndpoint:
        endpoint = MetricsEndpoint("127.0.0.1", 0, timeout=0.3)
        loop = Loop(endpoint, render)
        loops.append(loop)
        loop.thread.start()
        return endpoint

    yield start
    for loop in loops:
        loop.stop.set()
        loop.thread.join(5)
        assert not loop.thread.is_alive()
        loop.endpoint.close()


def test_scrape_with_urllib(served: Callable[[Callable[[], bytes]], MetricsEndpoint]) -> None:
    workers = {0: stats(3, in_flight=1).snapshot()}
    endpoint = served(lambda: render_metrics(workers, None, None, 2))
    assert endpoint.url == f"http://127.0.0.1:{endpoint.port}/metrics"
    with urllib.request.urlopen(endpoint.url, timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == CONTENT_TYPE
        body = resp.read()
        assert int(resp.headers["Content-Length"]) == len(body)
    assert value(body, "stagedoor_jobs_handled_total", kind="render_tickets") == 3
    assert value(body, "stagedoor_worker_restarts_total") == 2
    # A new snapshot shows on the next scrape.
    workers[0] = stats(4).snapshot()
    with urllib.request.urlopen(endpoint.url + "?x=1", timeout=5) as resp:
        body = resp.read()
    assert value(body, "stagedoor_jobs_handled_total", kind="render_tickets") == 4


def test_other_paths_and_methods(served: Callable[[Callable[[], bytes]], MetricsEndpoint]
                                 ) -> None:
    endpoint = served(lambda: b"x 1\n")
    base = f"http://127.0.0.1:{endpoint.port}"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(base + "/", timeout=5)
    assert info.value.code == 404
    info.value.close()
    request = urllib.request.Request(base + "/metrics", data=b"a=1", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 405
    info.value.close()


def test_render_failure_is_500_and_the_loop_survives(
        served: Callable[[Callable[[], bytes]], MetricsEndpoint],
        caplog: pytest.LogCaptureFixture) -> None:
    calls = {"n": 0}

    def render() -> bytes:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("snapshot broken")
        return b"ok 1\n"

    endpoint = served(render)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(endpoint.url, timeout=5)
    assert info.value.code == 500
    info.value.close()
    with urllib.request.urlopen(endpoint.url, timeout=5) as resp:
        assert resp.read() == b"ok 1\n"


def test_a_silent_client_does_not_hold_the_loop(
        served: Callable[[Callable[[], bytes]], MetricsEndpoint]) -> None:
    endpoint = served(lambda: b"ok 1\n")
    with socket.create_connection(("127.0.0.1", endpoint.port)) as silent:
        start = time.monotonic()
        with urllib.request.urlopen(endpoint.url, timeout=5) as resp:
            assert resp.read() == b"ok 1\n"
        assert time.monotonic() - start < 2  # about one endpoint timeout (0.3 s)
        silent.settimeout(5)
        assert silent.recv(100) == b""  # given up on and closed


def test_bind_errors_are_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(MetricsBindError) as info:
            MetricsEndpoint("127.0.0.1", port)
    message = str(info.value)
    assert message.startswith(f"cannot listen for metrics on 127.0.0.1:{port}: ")
    assert "\n" not in message
    with pytest.raises(MetricsBindError, match="expected an IP address"):
        MetricsEndpoint("metrics.example.com", 0)


def test_closed_endpoint() -> None:
    endpoint = MetricsEndpoint("localhost", 0)
    assert endpoint.host == "127.0.0.1"
    endpoint.close()
    endpoint.on_event(None, selectors.EVENT_READ, lambda: b"")  # nothing to accept from
    assert endpoint.open_connections == 0
    with pytest.raises(ValueError):
        endpoint.fileno()


def test_retire_into_a_copy_leaves_the_kept_totals_alone() -> None:
    kept = retire(empty_totals(), stats(5, durations=(0.01,)).snapshot())
    totals = retire(empty_totals(), kept)
    retire(totals, stats(2, durations=(0.01,)).snapshot())  # a retiring worker, this scrape
    assert kept["counters"]["handled"] == {"render_tickets": 5}
    assert sum(kept["durations"]["render_tickets"][:-1]) == 1
    assert totals["counters"]["handled"] == {"render_tickets": 7}
    assert sum(totals["durations"]["render_tickets"][:-1]) == 2


# -- every series labelled, every counter present, histograms, build and process info ---------

def full_text(stream: str = "jobs") -> bytes:
    a = WorkerStats(["render_tickets", "refund"])
    a.inc("handled", "render_tickets", 4)
    a.observe("render_tickets", 0.02)
    a.observe_wait("render_tickets", 0.004)
    a.observe_wait("render_tickets", 70.0)
    status = {"time_ms": 1_700_000_000_000, "stream": {"exists": True, "length": 9},
              "group": {"exists": True, "lag": 2}, "pending": {"count": 1, "oldest": None},
              "queue_age_ms": 1500, "trimmed_backlog": {"alarm": False,
                                                       "undelivered_trimmed": 0},
              "dead": {"length": 3}}
    return render_metrics({0: a.snapshot()}, None, status, 1,
                          extra_gauges={"workers_ready": 1, "workers_wanted": 2,
                                        "worker_rss_bytes": 3e7},
                          stream=stream, maxlen=100_000,
                          processes={0: {"rss_bytes": 3e7, "cpu_seconds": 1.25},
                                     1: {"rss_bytes": 0.0}},
                          build={"version": "9.9", "python": "3.11.7", "renderer": "native"})


def test_every_sample_carries_the_stream_label() -> None:
    text = full_text("mail")
    keys = samples(text)
    assert keys and all(("stream", "mail") in labels for _, labels in keys)
    assert value(text, "stagedoor_jobs_handled_total", stream="mail",
                 kind="render_tickets") == 4
    assert value(text, "stagedoor_stream_maxlen", stream="mail") == 100_000


def test_counters_start_at_zero_for_every_registered_kind() -> None:
    text = render_metrics({0: WorkerStats(["render_tickets", "refund"]).snapshot()}, None,
                          None, 0)
    for counter in ("handled", "failed", "retried", "dead_lettered", "duplicates"):
        for kind in ("render_tickets", "refund"):
            assert value(text, f"stagedoor_jobs_{counter}_total", kind=kind) == 0
    for counter in ("reclaimed", "deleted", "recovered"):  # per entry, before any kind
        assert value(text, f"stagedoor_jobs_{counter}_total", kind="") == 0
    assert value(text, "stagedoor_jobs_dead_lettered_total", kind="invalid") == 0
    assert value(text, "stagedoor_redis_oom") == 0


def test_queue_wait_histogram_build_info_and_per_slot_processes() -> None:
    text = full_text()
    h = "stagedoor_queue_wait_seconds"
    assert value(text, h + "_bucket", kind="render_tickets", le="0.005") == 1
    assert value(text, h + "_bucket", kind="render_tickets", le="60.0") == 1
    assert value(text, h + "_bucket", kind="render_tickets", le="300.0") == 2
    assert value(text, h + "_count", kind="render_tickets") == 2
    assert value(text, h + "_sum", kind="render_tickets") == pytest.approx(70.004)
    assert value(text, "stagedoor_build_info", version="9.9", python="3.11.7",
                 renderer="native") == 1
    assert value(text, "stagedoor_worker_resident_memory_bytes", slot="0") == 3e7
    assert value(text, "stagedoor_worker_resident_memory_bytes", slot="1") == 0
    assert value(text, "stagedoor_worker_cpu_seconds_total", slot="0") == 1.25
    assert ("stagedoor_worker_cpu_seconds_total", (("slot", "1"), ("stream", "jobs"))
            ) not in samples(text)  # not known is left out, not a fake 0
    assert value(text, "stagedoor_queue_age_seconds") == 1.5


def test_help_texts_say_what_and_in_which_unit() -> None:
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", full_text().decode(), re.M))
    assert len(helps) >= 30
    generic = [name for name, text in helps.items()
               if re.fullmatch(r"(Supervisor|Worker) gauge .*", text)]
    assert generic == []
    units = ("(seconds)", "(bytes)", "(entries)", "(jobs)", "(processes)", "(restarts)",
             "(retries)", "(boolean)", "(Unix seconds)", "(seconds).", "(bytes).")
    unitless = [name for name, text in helps.items()
                if not any(u in text for u in units) and name != "stagedoor_build_info"]
    assert unitless == [], unitless


def test_exposition_passes_promtool_check_metrics() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is needed (scripts/setup.sh installs it)"
    r = subprocess.run([promtool, "check", "metrics"], input=full_text(),
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout + r.stderr == b"", r.stdout + r.stderr
    # the check can fail: a counter without _total is reported
    bad = full_text().replace(b"stagedoor_worker_restarts_total", b"stagedoor_restarts")
    r = subprocess.run([promtool, "check", "metrics"], input=bad, capture_output=True,
                       timeout=60)
    assert r.returncode != 0 or r.stdout + r.stderr


def test_build_labels_name_this_install() -> None:
    from stagedoor import __version__

    labels = build_labels()
    assert labels["version"] == __version__
    assert labels["renderer"] == "native"  # setup.sh builds the extension
    assert labels["python"].count(".") == 2


# -- /healthz, /readyz, and scrapes parked for fresh queue numbers ------------------------------

def request(endpoint: MetricsEndpoint, path: str) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", endpoint.port), timeout=5)
    client.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    return client


def response(client: socket.socket) -> tuple[int, bytes]:
    data = b""
    while chunk := client.recv(65536):
        data += chunk
    client.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def pump(endpoint: MetricsEndpoint, sel: selectors.BaseSelector, render: Callable[[], bytes],
         until: Callable[[], bool], *, ready: Callable[[], Probe] | None = None,
         refresh: Callable[[], bool] | None = None, fresh: bool = False) -> None:
    """Turn the supervisor's loop (select, on_event, tick) in this thread until `until()`."""
    deadline = time.monotonic() + 5
    while not until():
        assert time.monotonic() < deadline, "the endpoint did not get there in 5 s"
        for key, mask in sel.select(0.01):
            endpoint.on_event(key.data[1], mask, render, ready=ready, refresh=refresh)
        endpoint.tick(render, ready=ready, fresh=fresh)


def answered(client: socket.socket) -> Callable[[], bool]:
    return lambda: bool(select.select([client], [], [], 0)[0])


def test_healthz_and_readyz() -> None:
    probe = {"ok": False, "reason": "workers 1/2 ready"}
    with MetricsEndpoint("127.0.0.1", 0) as endpoint, selectors.DefaultSelector() as sel:
        endpoint.attach(sel)

        def ready() -> Probe:
            return Probe(bool(probe["ok"]), str(probe["reason"]))

        for path, want in (("/healthz", (200, b"ok\n")),
                           ("/readyz", (503, b"workers 1/2 ready\n"))):
            client = request(endpoint, path)
            pump(endpoint, sel, lambda: b"m 1\n", answered(client), ready=ready)
            assert response(client) == want
        probe.update(ok=True, reason="workers 2/2 ready, Redis answered")
        client = request(endpoint, "/readyz")
        pump(endpoint, sel, lambda: b"m 1\n", answered(client), ready=ready)
        assert response(client) == (200, b"workers 2/2 ready, Redis answered\n")


def test_a_scrape_waits_for_fresh_numbers_but_not_forever() -> None:
    asked: list[float] = []
    numbers = {"n": 1}

    def refresh() -> bool:
        asked.append(time.monotonic())
        return True

    def render() -> bytes:
        return f"m {numbers['n']}\n".encode()

    with MetricsEndpoint("127.0.0.1", 0, wait_limit=0.3) as endpoint, \
            selectors.DefaultSelector() as sel:
        endpoint.attach(sel)

        def parked(n: int) -> Callable[[], bool]:
            return lambda: endpoint.parked >= n

        first, second = request(endpoint, "/metrics"), request(endpoint, "/metrics")
        pump(endpoint, sel, render, parked(2), refresh=refresh)
        assert len(asked) == 2 and 0 < endpoint.wait_time() <= 0.3
        first.setblocking(False)
        with pytest.raises(BlockingIOError):
            first.recv(1)  # parked: no answer yet
        first.setblocking(True)
        endpoint.tick(render, fresh=False)
        assert endpoint.parked == 2  # not fresh, not yet due
        numbers["n"] = 2  # the fresh numbers arrive
        endpoint.tick(render, fresh=True)
        assert endpoint.parked == 0
        assert response(first) == response(second) == (200, b"m 2\n")

        # nobody answers: the scrape gets what there is when its time is up
        late = request(endpoint, "/metrics")
        pump(endpoint, sel, render, parked(1), refresh=refresh)
        started = time.monotonic()
        while endpoint.parked:
            time.sleep(endpoint.wait_time())
            endpoint.tick(render, fresh=False)
        assert 0.2 <= time.monotonic() - started < 2
        assert response(late) == (200, b"m 2\n")
        assert endpoint.wait_time() == float("inf")

        # no worker to ask: answered at once
        now = request(endpoint, "/metrics")
        pump(endpoint, sel, render, answered(now), refresh=lambda: False)
        assert endpoint.parked == 0 and response(now) == (200, b"m 2\n")


def test_silent_connections_wait_in_the_selector_and_the_oldest_makes_room() -> None:
    """Non-blocking: silent clients cost the loop nothing, a request sent in pieces is
    read as it comes, and at max_connections the oldest silent client is closed for a
    new one (a crowd of them cannot lock a probe out)."""
    with MetricsEndpoint("127.0.0.1", 0, max_connections=4) as endpoint, \
            selectors.DefaultSelector() as sel:
        endpoint.attach(sel)
        silent = [socket.create_connection(("127.0.0.1", endpoint.port)) for _ in range(4)]
        pump(endpoint, sel, lambda: b"", lambda: endpoint.open_connections == 4)
        slow = socket.create_connection(("127.0.0.1", endpoint.port), timeout=5)
        slow.sendall(b"GET /hea")  # the oldest silent one goes for it
        pump(endpoint, sel, lambda: b"", answered(silent[0]))
        assert silent[0].recv(10) == b""
        slow.sendall(b"lthz HTTP/1.0\r\n\r\n")
        pump(endpoint, sel, lambda: b"", answered(slow))
        assert response(slow) == (200, b"ok\n")
        assert endpoint.open_connections == 3  # the other silent ones, still waiting
        for s in silent:
            s.close()
