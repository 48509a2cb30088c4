"""A real Prometheus server scraping a real supervisor: the shipped dashboard and alerts.

Debian's `prometheus` (installed by scripts/setup.sh) runs on a free loopback port and
scrapes `stagedoor-supervise --metrics-port` after a demo drain (render jobs, refunds
and one malformed entry).  Through its HTTP API: every panel's query of the shipped
Grafana dashboard returns at least one series, every alert expression evaluates
without an error, every rule the server loaded is healthy and none fires on a healthy
queue, and every stagedoor series carries the stream label.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import free_port
from stagedoor.demo.orders import demo_order
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import enqueue_sync, ensure_group_sync
from stagedoor.tickets.orders import put_orders_sync
from tests.support.supervisor import supervisor, wait_for
from tests.telemetry.test_monitoring import ALERTS, alert_rules, panel_queries, tool


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str, **params: str) -> dict[str, Any]:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                doc: dict[str, Any] = json.loads(r.read())
        except urllib.error.HTTPError as e:  # 400/422 carry the error as JSON
            doc = json.loads(e.read())
        return doc

    def query(self, expr: str) -> dict[str, Any]:
        return self.get("/api/v1/query", query=expr)

    def series(self, expr: str) -> list[dict[str, Any]]:
        doc = self.query(expr)
        assert doc["status"] == "success", (expr, doc)
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result


@contextlib.contextmanager
def prometheus(tmp_path: Path, target_port: int) -> Iterator[Prometheus]:
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                   "scrape_timeout": "900ms"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "stagedoor",
                            "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}],
    }
    tmp_path.mkdir(exist_ok=True)
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config))
    log = tmp_path / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [tool("prometheus"), f"--config.file={cfg}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}",
             "--query.lookback-delta=30s"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        prom = Prometheus(f"http://127.0.0.1:{port}")

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited {proc.returncode}:\n"
                                     f"{log.read_text()[-3000:]}")
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"{prom.base}/-/ready", timeout=1) as r:
                return bool(r.status == 200)
            return False

        wait_for(ready, 30, 0.1, "prometheus ready")
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def seed_demo(settings: Settings, client: redis.Redis, orders: int = 40) -> int:
    """What `stagedoor demo` queues: render jobs, a few refunds, one malformed entry."""
    base = 7_000_000
    batch = [demo_order(base + i) for i in range(orders)]
    put_orders_sync(client, settings, batch)
    jobs = [make_job("render_tickets", o.order_id, base + i, f"req{i}", f"trace{i}")
            for i, o in enumerate(batch)]
    jobs += [make_job("refund", o.order_id, base + orders + i, f"ref{i}", f"rtrace{i}")
             for i, o in enumerate(batch[:4])]
    ensure_group_sync(client, settings)
    enqueue_sync(client, settings, jobs)
    client.execute_command("XADD", settings.stream, "*", "kind", "render_tickets",
                           "order_id", "44x71", "outbox_id", str(base + 999),
                           "request_id", "demo", "trace", "demo")
    return len(jobs) + 1


@pytest.mark.slow
def test_real_prometheus_evaluates_every_panel_and_alert(tmp_path: Path, redis_url: str,
                                                         settings: Settings,
                                                         sync_redis: redis.Redis) -> None:
    total = seed_demo(settings, sync_redis)
    metrics_port = free_port()
    with supervisor(tmp_path, redis_url, ["--workers", "2", "--metrics-port",
                                          str(metrics_port)], handlers=False) as sup:
        sup.wait_ready(2)

        def drained() -> bool:
            sup.assert_running()
            info = {g["name"]: g for g in sync_redis.xinfo_groups(settings.stream)}
            group = info[settings.group.encode()]
            return bool(group["pending"] == 0 and group["lag"] == 0
                        and sync_redis.xlen(settings.dead_stream) == 1)

        wait_for(drained, 60, 0.1, f"{total} demo jobs drained")
        with prometheus(tmp_path / "prom", metrics_port) as prom:
            # enough scrapes for rate() over the dashboard's window, and rules evaluated
            wait_for(lambda: prom.series(
                "count_over_time(stagedoor_workers_wanted[1m]) >= 6"), 60, 0.5,
                "six scrapes")
            up = prom.series('up{job="stagedoor"}')
            assert [s["value"][1] for s in up] == ["1"], up
            handled = prom.series("sum(stagedoor_jobs_handled_total)")
            assert float(handled[0]["value"][1]) == total - 1  # all but the malformed one

            empty = {title: q for title, qs in panel_queries("30s").items() for q in qs
                     if not prom.series(q)}
            assert not empty, f"panel queries without a series: {empty}"

            for rule in alert_rules():
                doc = prom.query(rule["expr"])
                assert doc["status"] == "success", (rule["alert"], doc)

            def evaluated() -> list[dict[str, Any]] | None:
                groups = prom.get("/api/v1/rules")["data"]["groups"]
                rules: list[dict[str, Any]] = [r for g in groups for r in g["rules"]]
                done = rules and all(r.get("lastEvaluation", "").startswith("20")
                                     for r in rules)
                return rules if done else None

            rules = wait_for(evaluated, 30, 0.5, "rules evaluated")
            assert {r["name"] for r in rules} == {r["alert"] for r in alert_rules()}
            assert [r["name"] for r in rules if r["health"] != "ok"] == [], rules
            # A healthy drained queue raises nothing (its dead letter is older than the
            # first scrape, so the dead-letter stream did not grow in Prometheus' view).
            assert [r["name"] for r in rules if r["state"] != "inactive"] == []

            # every series carries the stream label (two queues never collide)
            unlabelled = prom.series('{__name__=~"stagedoor_.+", stream=""}')
            assert unlabelled == [], sorted({s["metric"]["__name__"] for s in unlabelled})
            streams = prom.get("/api/v1/label/stream/values",
                               **{"match[]": "stagedoor_workers_wanted"})["data"]
            assert streams == [settings.stream]

            # what the issue-24 rules read is exported for real: the renderer each worker
            # runs, and the dead letters trimmed at the cap (none here)
            native = prom.series('sum(stagedoor_workers_renderer{renderer="native"})')
            assert [s["value"][1] for s in native] == ["2"]
            trimmed = prom.series("stagedoor_dead_letters_trimmed_total")
            assert [s["value"][1] for s in trimmed] == ["0"]
            # a supervisor that stops answering is seen by StagedoorTargetDown's expression
            down = next(r["expr"] for r in alert_rules() if r["alert"] == "StagedoorTargetDown")
            sup.signal(15)
            assert sup.wait() == 0
            seen = wait_for(lambda: prom.series(down), 30, 0.5, "the target seen down")
            assert [s["metric"]["instance"] for s in seen] == [f"127.0.0.1:{metrics_port}"]


