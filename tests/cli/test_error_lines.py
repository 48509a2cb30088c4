"""Each error names its cause, in one line, with its documented exit (issue 24, item 9).

On real topologies (tests/support/topology.py): a Sentinel master that is down is not "no
master of that name"; a Cluster whose slots are not assigned, or in cluster_state:fail,
is "cluster not ready" (exit 69; UNKNOWN, 3, for `status --check`), not a traceback;
`status --check` against sentinels that do not answer is one short UNKNOWN line; a
reader that goes away (`dead list | head`) ends the command quietly with 141.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from redis.sentinel import MasterNotFoundError

from stagedoor.config import Settings
from stagedoor.stream import sentinel
from stagedoor.stream.errors import describe_unreachable
from stagedoor.stream.queue import dead_letter_fields
from tests.support.aclmode import server_args
from tests.support.cli import cli
from tests.support.faults.harness import REPO
from tests.support.paths import SRC
from tests.support.servers import SuiteRedis
from tests.support.topology import SERVICE, ClusterSet, SentinelSet, _cluster_port
from tests.support.worker import poll

pytestmark = pytest.mark.server

ENQUEUE = ("enqueue", "--kind", "render_tickets", "--order-id", "1", "--outbox-id", "1")


def one_line(proc: subprocess.CompletedProcess[str], where: str = "stderr") -> str:
    text = getattr(proc, where)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def assert_outage(url: str, cause: str, *, absent: str = "§", longest: int = 500) -> None:
    """status, enqueue, dead list: exit 69, one line naming the cause; --check (text and
    JSON): UNKNOWN, 3, one line on stdout."""
    for command in (("status",), ENQUEUE, ("dead", "list")):
        proc = cli(*command, "--redis-url", url)
        line = one_line(proc)
        assert proc.returncode == 69, (command, proc.stderr)
        assert cause in line and absent not in line, (command, line)
        assert len(line) < longest and "ConnectionPool" not in line, line
    proc = cli("status", "--check", "--redis-url", url)
    line = one_line(proc, "stdout")
    assert proc.returncode == 3, (proc.returncode, line)
    assert line.startswith("STAGEDOOR UNKNOWN") and cause in line and absent not in line, line
    assert len(line) < longest and "ConnectionPool" not in line, line
    proc = cli("status", "--check", "--json", "--redis-url", url)
    assert proc.returncode == 3 and '"UNKNOWN"' in proc.stdout, proc.stdout + proc.stderr


def test_sentinel_master_down_is_not_a_wrong_name(sentinels: SentinelSet) -> None:
    # A wrong name stays "no master of that name".
    wrong = sentinels.url.replace(f"/{SERVICE}/", "/nosuch/")
    proc = cli("status", "--redis-url", wrong)
    assert proc.returncode == 69 and "monitor no master of that name" in proc.stderr
    # No replica to promote, then the master killed: the sentinels know the name and
    # call the master down; that is what we say.
    sentinels.replica.stop()
    sentinels.kill_master()

    def down() -> bool:
        flags = str(sentinels.sentinels[0].master()["flags"])
        return "s_down" in flags or "o_down" in flags
    poll(down, 30, "the sentinels to see the master down")
    assert_outage(sentinels.url, "is down (flags", absent="no master of that name")
    # Sentinels that do not answer: one short UNKNOWN line, no client reprs.
    for s in sentinels.sentinels:
        s.stop()
    # (each sentinel's address and error, not redis-py's 900-character client reprs)
    assert_outage(sentinels.url, "no sentinel answered", longest=800)


def test_mid_failover_the_master_is_down_not_unknown(sentinels: SentinelSet) -> None:
    """Kill the master with a replica to promote: from the sentinels' s_down to the
    promotion, every 'no master' the clients see says the master is down (or the
    failover is in progress), none says the name is unknown."""
    settings = Settings(redis_url=sentinels.url)
    target = sentinel.parse(sentinels.url)
    manager = sentinel.NamingSyncSentinel(list(target.sentinels),
                                          sentinel_kwargs=sentinel.sentinel_kwargs(settings))
    old, _ = sentinels.kill_master()
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            _, port = manager.discover_master(SERVICE)
        except MasterNotFoundError as e:
            seen.append(describe_unreachable(sentinels.url, e))
        else:
            if int(port) != old:
                break
        time.sleep(0.05)
    else:
        raise AssertionError("no promotion within 60 s")
    for s in manager.sentinels:
        s.close()
    assert seen, "the window between s_down and the promotion was not observed"
    assert all("is down (flags" in line for line in seen), set(seen)
    assert not any("no master of that name" in line for line in seen)


def test_cluster_whose_slots_are_not_assigned(tmp_path: Path) -> None:
    nodes = [SuiteRedis(tmp_path / f"node-{i}", port=_cluster_port(), extra_args=[
        *server_args(cluster=True), "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf"]) for i in range(2)]
    try:
        for node in nodes:
            node.start()
        url = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes)
        assert_outage(url, "cluster not ready: slots not assigned")
        # A worker says so too (its boot retries, then gives up with 69).
        proc = cli("work", "--burst", "--boot-timeout", "1", "--log-format", "text",
                   "--redis-url", url)
        assert proc.returncode == 69, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert "cluster not ready: slots not assigned" in last, last
    finally:
        for node in nodes:
            node.stop()


def test_cluster_state_fail_is_unknown_for_check(tmp_path: Path) -> None:
    topo = ClusterSet(tmp_path / "cluster", masters=3, replicas=0)
    try:
        owner = topo.owner("{jobs}")
        victim = next(p for p in topo.nodes if p != owner)
        topo.kill(victim)

        def failed() -> bool:
            c = redis.Redis(host="127.0.0.1", port=owner, protocol=2, socket_timeout=2)
            try:
                return "cluster_state:fail" in c.execute_command("CLUSTER", "INFO").decode()
            finally:
                c.close()
        poll(failed, 30, "cluster_state:fail")
        url = f"redis+cluster://127.0.0.1:{owner}"
        assert_outage(url, "cluster not ready: cluster_state:fail")
    finally:
        topo.stop()


def test_a_reader_gone_away_ends_quietly(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, protocol=2)
    fields = [b"kind", b"render_tickets", b"order_id", b"1", b"outbox_id", b"1",
              b"request_id", b"r", b"trace", b"t"]
    pipe = client.pipeline(transaction=False)
    for _ in range(3000):
        pipe.execute_command("XADD", "jobs:dead", "*", *dead_letter_fields(
            fields, error="boom " * 20, source_id="1-0", deliveries=6, consumer="c"))
    pipe.execute()
    client.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
    env["PYTHONPATH"] = f"{SRC}{os.pathsep}{REPO}"
    for command in (["dead", "list", "--count", "3000"],
                    ["dead", "list", "--count", "3000", "--json"]):
        # `stagedoor dead list | head -c 100`, in the shell's way.
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c",
             f'"$0" -m stagedoor.cli {" ".join(command)} --redis-url "$1" | head -c 100',
             sys.executable, redis_url], capture_output=True, text=True, timeout=60,
            env=env, cwd=REPO)
        assert proc.stderr == "", proc.stderr
        # 141 as SIGPIPE would; one big write of the JSON array may also end in 0, as
        # the kernel reports the part written before the reader left, not an error.
        assert proc.returncode == 141 or ("--json" in command and proc.returncode == 0)
        assert len(proc.stdout) == 100
