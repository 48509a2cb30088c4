"""The supervisor, run for real: a subprocess, real signals, the test's own Redis.

Every test starts `stagedoor-supervise` through its entry point with short intervals
(tests/support/supervisor.py) and the handlers of tests/support/handlers/basic.py, which
leave a line per delivery and per completion in a marks file.  Nothing sleeps to
synchronise: each step polls for the condition it needs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import redis

from stagedoor.demo.embedded_redis import EmbeddedRedis, free_port
from tests.support.cli import SUPERVISE, cli
from tests.support.supervisor import (
    REPO,
    NotifySocket,
    enqueue,
    mark_text,
    marks,
    supervisor,
    tcp_peers,
    thread_count,
    wait_for,
)
from tests.support.worker import gone

RESULTS = REPO / "var" / "supervisor-timings.json"


def record(name: str, value: float) -> None:
    """Timings go to stdout (-s) and to var/supervisor-timings.json; never asserted tight."""
    print(f"\n[timing] {name}: {value * 1000:.0f} ms")
    RESULTS.parent.mkdir(exist_ok=True)
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[name] = round(value, 4)
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True))


def pending(client: redis.Redis) -> list[tuple[str, str, int]]:
    """(id, consumer, deliveries) of every pending entry."""
    rows = client.xpending_range("jobs", "workers", "-", "+", 100)
    return [(text(r["message_id"]), text(r["consumer"]), int(r["times_delivered"]))
            for r in rows]


def text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- the command line ------------------------------------------------------------------------

def test_help_bad_flag_bad_config() -> None:
    r = cli("--help", entry=SUPERVISE)
    assert r.returncode == 0
    for words in ("supervise N stagedoor worker processes", "SIGHUP", "SIGTTIN", "exit codes",
                  "69", "70", "78", "--workers", "--flap-max"):
        assert words in r.stdout, words
    r = cli("--no-such-flag", entry=SUPERVISE)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cli("--workers", "0", "--redis-url", "redis://127.0.0.1:1/0", entry=SUPERVISE)
    assert r.returncode == 78
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "config error" in r.stderr and "workers=0" in r.stderr, r.stderr
    r = cli("--redis-url", "redis://127.0.0.1:1/0", env={"STAGEDOOR_HEARTBEAT_TIMEOUT": "x"},
            entry=SUPERVISE)
    assert r.returncode == 78 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cli(entry=SUPERVISE)  # no Redis URL at all
    assert r.returncode == 78 and "redis_url is empty" in r.stderr, r.stderr


# -- boot, systemd, fork hygiene, graceful stop ---------------------------------------------

def test_boot_notify_fork_hygiene_and_graceful_stop(tmp_path: Path, redis_url: str,
                                                     redis_server: EmbeddedRedis,
                                                     sync_redis: redis.Redis) -> None:
    notify = NotifySocket(tmp_path / "notify.sock")
    env = {"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "400000"}
    with supervisor(tmp_path, redis_url, ["--workers", "2"], env=env) as sup:
        pids = sup.wait_ready(2)
        assert sorted(pids) == [0, 1]
        # READY means the worker reached Redis and ensured the group (the db was empty)
        assert [g["name"] for g in sync_redis.xinfo_groups("jobs")] == [b"workers"]
        ready = wait_for(lambda: notify.find("READY", "1"), what="READY=1")
        assert len(ready) == 1 and "workers 2/2 ready" in ready[0]["STATUS"], ready
        # WATCHDOG=1 at half of WATCHDOG_USEC: several within a second.
        wait_for(lambda: len(notify.find("WATCHDOG", "1")) >= 3, 3, what="watchdog pings")
        wait_for(lambda: any("rss" in m.get("STATUS", "") for m in notify.drain()),
                 what="STATUS with RSS")

        # The supervisor: one thread, no TCP connection to Redis.  The same check on a
        # worker finds its connections, so it can fail.
        assert thread_count(sup.pid) == 1
        assert all(remote != redis_server.port for _, remote in tcp_peers(sup.pid))
        assert any(remote == redis_server.port for _, remote in tcp_peers(pids[0]))
        assert thread_count(pids[0]) >= 1
        # Worker signal dispositions: SIGPIPE and SIGINT ignored (EPIPE instead of death;
        # ^C is the supervisor's business), SIGTERM caught (graceful stop).
        masks = dict(line.split(":\t") for line in
                     Path(f"/proc/{pids[0]}/status").read_text().splitlines() if "\t" in line)
        ignored, caught = int(masks["SigIgn"], 16), int(masks["SigCgt"], 16)
        for sig in (signal.SIGPIPE, signal.SIGINT):
            assert ignored >> (sig - 1) & 1, sig
        assert caught >> (signal.SIGTERM - 1) & 1

        # Children get no NOTIFY_SOCKET / WATCHDOG_USEC.
        enqueue(redis_url, "envdump", [1])
        wait_for(lambda: "done" in mark_text(sup, 1), what="envdump job")
        assert "NOTIFY_SOCKET= WATCHDOG_USEC=\n" in mark_text(sup, 1), mark_text(sup, 1)
        # ... and the STATUS line counts it (from the workers' heartbeats)
        wait_for(lambda: any(m.get("STATUS", "").startswith("workers 2/2 ready, handled 1, "
                                                            "restarts 0, rss ")
                             for m in notify.drain()), 5, what="STATUS with handled 1")

        # Each slot's consumer name is stable: sup-00, sup-01 in the group.
        names = {text(c["name"])
                 for c in sync_redis.xinfo_consumers("jobs", "workers")}
        assert names == {"sup-00", "sup-01"}, names

        # SIGTERM with a job in flight: it finishes and is acked, then everything exits 0.
        enqueue(redis_url, "slow", [2])
        wait_for(lambda: "start" in mark_text(sup, 2), what="slow job start")
        children = sup.children()
        assert len(children) == 2
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0, sup.stderr()[-3000:]
        assert [e for e, _, _ in marks(sup, 2)] == ["start", "done"]
        assert pending(sync_redis) == []
        assert gone(children)
        stopping = notify.find("STOPPING", "1")
        assert len(stopping) == 1
        # STOPPING came after READY and after the last watchdog before it
        assert notify.messages.index(stopping[0]) > notify.messages.index(ready[0])
    notify.close()


# -- crashes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "waitpid"])
def test_kill9_mid_job_is_respawned_and_job_handled_again(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis, pidfd: bool) -> None:
    env = {"SUP_TEST_SLOW": "0.5"}
    if not pidfd:
        env["_STAGEDOOR_NO_PIDFD"] = "1"
    with supervisor(tmp_path, redis_url, ["--workers", "1"], env=env) as sup:
        old = sup.wait_ready(1)[0]
        enqueue(redis_url, "slow", [7])
        wait_for(lambda: marks(sup, 7), what="slow job start")
        assert pending(sync_redis)[0][1:] == ("sup-00", 1)
        killed_at = time.time()
        t0 = time.monotonic()
        os.kill(old, signal.SIGKILL)
        new = wait_for(lambda: (p := sup.ready_pids().get(0)) not in (None, old) and p,
                       10, 0.005, "respawned worker")
        respawn = time.monotonic() - t0
        # The second delivery, to the same consumer name, from its own pending list.
        wait_for(lambda: len(marks(sup, 7)) >= 2, what="second delivery")
        assert pending(sync_redis)[0][1:] == ("sup-00", 2)
        wait_for(lambda: marks(sup, 7)[-1][0] == "done", what="job done")
        events = marks(sup, 7)
        assert [(e, p) for e, p, _ in events] == [("start", old), ("start", new),
                                                  ("done", new)]
        done = events[-1][2] - killed_at
        record(f"kill9_respawn_ready_{'pidfd' if pidfd else 'waitpid'}", respawn)
        record(f"kill9_to_job_done_{'pidfd' if pidfd else 'waitpid'}", done)
        record(f"kill9_to_redelivery_{'pidfd' if pidfd else 'waitpid'}",
               events[1][2] - killed_at)
        assert respawn < 5.0  # generous bound; the measured value is printed
        wait_for(lambda: pending(sync_redis) == [], what="ack")
        assert sup.status()["restarts"] == 1
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def test_hung_worker_gets_sigabrt_thread_dump_then_respawn(tmp_path: Path,
                                                           redis_url: str) -> None:
    args = ["--workers", "2", "--heartbeat-timeout", "1.5"]  # the healthy one must not trip
    with supervisor(tmp_path, redis_url, args) as sup:
        pids = sup.wait_ready(2)
        t0 = time.monotonic()
        os.kill(pids[1], signal.SIGSTOP)
        new = wait_for(lambda: (p := sup.ready_pids().get(1)) not in (None, pids[1]) and p,
                       10, what="replacement of the stopped worker")
        record("sigstop_to_replacement_ready", time.monotonic() - t0)
        assert gone([pids[1]])
        assert sup.ready_pids()[0] == pids[0]  # the healthy one was left alone
        err = sup.stderr()
        assert "is hung" in err
        # faulthandler's dump of the stopped worker (SIGCONT lets it run the handler)
        assert "Fatal Python error: Aborted" in err, err[-3000:]
        assert "Current thread" in err or "Thread 0x" in err
        assert new != pids[1]
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def test_worker_blocking_its_loop_is_aborted_with_its_stack(tmp_path: Path, redis_url: str,
                                                             sync_redis: redis.Redis) -> None:
    with supervisor(tmp_path, redis_url, ["--workers", "1", "--heartbeat-timeout", "1"],
                    env={"SUP_TEST_BLOCK": "30"}) as sup:
        old = sup.wait_ready(1)[0]
        enqueue(redis_url, "block", [3])
        wait_for(lambda: marks(sup, 3), what="blocking job start")
        wait_for(lambda: (p := sup.ready_pids().get(0)) not in (None, old) and p, 10,
                 what="respawn after the hang")
        err = sup.stderr()
        # the dump names the handler that blocked the loop
        assert "support/handlers/basic.py" in err and "in block" in err, err[-3000:]
        # the job comes back (second delivery) to the new worker, which hangs again:
        wait_for(lambda: len(marks(sup, 3)) == 2, what="redelivery of the blocking job")
        sup.signal(signal.SIGTERM)
        sup.signal(signal.SIGTERM)  # quick stop: the blocked worker is SIGKILLed
        assert sup.wait(10) == 0
        assert pending(sync_redis)[0][2] == 2  # never lost: pending, delivered twice


# -- deploys and scaling -------------------------------------------------------------------

def test_sighup_rolling_restart_keeps_capacity(tmp_path: Path, redis_url: str,
                                               sync_redis: redis.Redis) -> None:
    notify = NotifySocket(tmp_path / "notify.sock")
    with supervisor(tmp_path, redis_url, ["--workers", "2"],
                    env={"NOTIFY_SOCKET": str(notify.path)}) as sup:
        old = sup.wait_ready(2)
        wait_for(lambda: notify.find("READY", "1"), what="READY=1")
        enqueue(redis_url, "noop", range(1, 51))
        sup.signal(signal.SIGHUP)
        samples: list[int] = []
        most = 0

        def rolled() -> bool:
            nonlocal most
            st = sup.status()
            samples.append(sum(1 for v in st["slots"].values() if v["ready"]))
            most = max(most, sum(1 for p in st["processes"] if p["role"] == "replacement"))
            now = sup.ready_pids()
            return (not st["reloading"] and len(now) == 2
                    and not set(now.values()) & set(old.values())
                    and len(st["processes"]) == 2)

        wait_for(rolled, 20, 0.005, "both slots rolled")
        assert min(samples) == 2, "a slot had no ready worker during the rolling restart"
        assert most == 1, "one slot at a time: at most one replacement booting"
        assert gone(list(old.values()))
        enqueue(redis_url, "noop", range(51, 101))
        wait_for(lambda: all("done" in mark_text(sup, i) for i in range(1, 101)),
                 what="every job of the reload window done")
        wait_for(lambda: pending(sync_redis) == [], what="acks")
        # the old worker of a slot was told to stop only after its successor was READY
        msgs = [line.get("msg", "") for line in sup.log_lines()]
        for slot in (0, 1):
            new_pid = sup.ready_pids()[slot]
            ready_at = next(i for i, m in enumerate(msgs)
                            if m.startswith(f"worker slot {slot} pid {new_pid} ready"))
            stop_at = next(i for i, m in enumerate(msgs) if m.startswith(
                f"stopping worker slot {slot} pid {old[slot]} gracefully"))
            assert ready_at < stop_at
        assert notify.find("RELOADING", "1")
        assert len(notify.find("READY", "1")) == 2  # boot, then the end of the reload
        assert sup.status()["restarts"] == 0
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0
    notify.close()


def test_sigttin_sigttou_scale_but_never_below_one(tmp_path: Path, redis_url: str) -> None:
    with supervisor(tmp_path, redis_url, ["--workers", "1"]) as sup:
        first = sup.wait_ready(1)[0]
        sup.signal(signal.SIGTTIN)
        two = sup.wait_ready(2)
        sup.signal(signal.SIGTTIN)
        three = sup.wait_ready(3)
        assert three[0] == two[0] == first and three[1] == two[1]
        # one at a time: standard signals sent in a burst coalesce into one delivery
        for n in (2, 1):
            sup.signal(signal.SIGTTOU)

            def slots_are(n: int = n) -> bool:
                return len(sup.status()["slots"]) == n

            wait_for(slots_are, what=f"{n} slots")
        sup.signal(signal.SIGTTOU)
        wait_for(lambda: "SIGTTOU ignored" in sup.stderr(), what="the last SIGTTOU refused")
        wait_for(lambda: len(sup.status()["processes"]) == 1, what="scaled down to one")
        assert sup.ready_pids() == {0: first}
        assert gone([three[1], three[2]])
        assert "SIGTTOU ignored: 1 worker is the minimum" in sup.stderr()
        sup.signal(signal.SIGINT)
        assert sup.wait() == 0


def test_workers_exit_when_the_supervisor_is_killed(tmp_path: Path, redis_url: str,
                                                    sync_redis: redis.Redis) -> None:
    with supervisor(tmp_path, redis_url, ["--workers", "2"],
                    env={"SUP_TEST_SLOW": "1.0"}) as sup:
        pids = list(sup.wait_ready(2).values())
        enqueue(redis_url, "slow", [5])
        wait_for(lambda: marks(sup, 5), what="slow job start")
        t0 = time.monotonic()
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait()
        wait_for(lambda: gone(pids), 8, what="orphaned workers to exit")
        record("supervisor_kill9_to_workers_gone", time.monotonic() - t0)
        # they drained: the job they held finished and was acked
        assert [e for e, _, _ in marks(sup, 5)] == ["start", "done"]
        assert pending(sync_redis) == []


# -- boot failures and flapping ---------------------------------------------------------------

def test_bad_handler_module_exits_78(tmp_path: Path, redis_url: str) -> None:
    with supervisor(tmp_path, redis_url,
                    ["--workers", "2", "--handlers", "tests.support.handlers.basic:nope"]) as sup:
        t0 = time.monotonic()
        assert sup.wait(20) == 78
        record("bad_handler_to_exit_78", time.monotonic() - t0)
        err = sup.stderr()
        assert "has no 'nope'" in err
        assert "every slot failed to boot 3 times" in err
        assert not sup.children()


def test_redis_unreachable_at_boot_exits_69(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with supervisor(tmp_path, url, ["--workers", "2", "--boot-timeout", "1"]) as sup:
        assert sup.wait(20) == 69
        assert "no worker became ready within boot_timeout=1s" in sup.stderr() \
            or "failed to boot" in sup.stderr()
        assert not sup.children()


def test_redis_that_comes_up_late_is_waited_for(tmp_path: Path,
                                               own_redis: EmbeddedRedis) -> None:
    own_redis.stop()
    with supervisor(tmp_path, own_redis.url, ["--workers", "2", "--boot-timeout", "20"]) as sup:
        wait_for(lambda: "Redis not reachable" in sup.stderr(), what="workers retrying")
        assert not sup.status().get("ready")
        own_redis.start()
        sup.wait_ready(2)
        assert sup.status()["restarts"] == 0
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def test_flapping_pool_exits_70(tmp_path: Path, redis_url: str,
                                sync_redis: redis.Redis) -> None:
    """A fleet that cannot work: every job kills its worker and none is handled.  (One
    such job alone no longer does it: it is dead-lettered after the crash it causes
    while it runs alone, 3 crashes, below the limit; flapping needs a window without
    a job handled: tests/faults/test_poison.py.)"""
    args = ["--workers", "2", "--flap-max", "3", "--flap-window", "30",
            "--max-deliveries", "100"]
    with supervisor(tmp_path, redis_url, args) as sup:
        sup.wait_ready(2)
        enqueue(redis_url, "crash", [9, 10, 11])  # each kills every worker that takes it
        assert sup.wait(20) == 70
        err = sup.stderr()
        assert ("flapping: 4 worker restarts in 30s (limit 3) and no job handled in that "
                "time") in err, err[-3000:]
        assert sum(len(marks(sup, i)) for i in (9, 10, 11)) == 4  # a start per crash
        dead = sync_redis.xrange("jobs:dead")
        # still pending or dead-lettered with its cause: never lost
        assert len(pending(sync_redis)) + len(dead) == 3
        assert all(b"killed its worker: SIGKILL" in dict(f)[b"dead:error"] for _i, f in dead)


# -- memory, metrics ----------------------------------------------------------------------------

def test_max_worker_memory_recycles_gracefully(tmp_path: Path, redis_url: str,
                                               sync_redis: redis.Redis) -> None:
    with supervisor(tmp_path, redis_url, ["--workers", "1", "--max-worker-memory", "1"]) as sup:
        first = sup.wait_ready(1)[0]
        enqueue(redis_url, "noop", range(1, 41))
        samples: list[int] = []

        def recycled_twice() -> bool:
            st = sup.status()
            samples.append(sum(1 for v in st["slots"].values() if v["ready"]))
            return bool(st["recycled"] >= 2)

        wait_for(recycled_twice, 20, 0.005, "two recycles")
        assert min(samples) == 1
        assert sup.ready_pids()[0] != first
        assert "over the limit" in sup.stderr() and "recycling" in sup.stderr()
        assert sup.status()["restarts"] == 0  # a recycle is not a crash
        wait_for(lambda: all("done" in mark_text(sup, i) for i in range(1, 41)),
                 what="jobs done across recycles")
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0
        assert pending(sync_redis) == []


def test_metrics_endpoint_serves_handled_counter(tmp_path: Path, redis_url: str) -> None:
    port = free_port()
    with supervisor(tmp_path, redis_url, ["--workers", "2", "--metrics-port", str(port)]) as sup:
        pids = sup.wait_ready(2)
        # the workers closed the supervisor's listening socket right after the fork
        for pid in pids.values():
            assert all(local != port for local, _ in tcp_peers(pid))
        assert any(local == port for local, _ in tcp_peers(sup.pid))
        enqueue(redis_url, "noop", range(1, 6))
        wait_for(lambda: all("done" in mark_text(sup, i) for i in range(1, 6)),
                 what="5 jobs done")

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                return str(r.read().decode())

        def handled() -> str:
            text = scrape()
            return (text if 'stagedoor_jobs_handled_total{kind="noop",stream="jobs"} 5.0'
                    in text else "")

        text = wait_for(handled, 5, 0.05, "handled counter in the scrape")
        assert 'stagedoor_worker_restarts_total{stream="jobs"} 0.0' in text
        assert 'stagedoor_workers_ready{stream="jobs"} 2.0' in text
        # the queue status from slot 0 arrives with a heartbeat
        wait_for(lambda: 'stagedoor_queue_status_available{stream="jobs"} 1.0' in scrape(),
                 10, 0.1, "queue status")
        assert thread_count(sup.pid) == 1
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def test_scrape_reads_the_queue_fresh_and_health_endpoints(
        tmp_path: Path, own_redis: EmbeddedRedis) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(base + path, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.read().decode()

    def dead_letters(text: str) -> float | None:
        m = re.search(r'^stagedoor_dead_letter_length\{stream="jobs"\} (\S+)$', text, re.M)
        return float(m[1]) if m else None

    client = redis.Redis.from_url(own_redis.url, protocol=2)
    try:
        with supervisor(tmp_path, own_redis.url,
                        ["--workers", "2", "--metrics-port", str(port)]) as sup:
            sup.wait_ready(2)
            assert get("/healthz") == (200, "ok\n")
            wait_for(lambda: get("/readyz")[0] == 200, 10, 0.1, "/readyz 200")
            assert get("/readyz") == (200, "workers 2/2 ready, Redis answered\n")
            wait_for(lambda: dead_letters(get("/metrics")[1]) == 0, 10, 0.1, "queue gauges")
            # Numbers that change between two scrapes show on the next one: the scrape
            # asked slot 0 to read them (they used to be up to 5 s old).
            for n in range(1, 4):
                client.xadd("jobs:dead", {"kind": "x", "dead:error": "test"})
                status, text = get("/metrics")
                assert status == 200 and dead_letters(text) == n, text[-2000:]
            # Redis away: the process is healthy, not ready, and scrapes still answer
            # within the endpoint's bound with the last numbers it has.
            own_redis.pause()
            try:
                started = time.monotonic()
                status, text = get("/metrics")
                assert status == 200 and dead_letters(text) == 3
                assert time.monotonic() - started < 2
                assert get("/healthz") == (200, "ok\n")
                status, reason = get("/readyz")
                assert status == 503 and "Redis did not answer" in reason, reason
            finally:
                own_redis.resume()
            wait_for(lambda: get("/readyz")[0] == 200, 15, 0.2, "/readyz 200 again")
            sup.signal(signal.SIGTERM)
            assert sup.wait() == 0
    finally:
        client.close()


def test_process_titles_say_which_is_the_supervisor_and_which_slot(
        tmp_path: Path, redis_url: str) -> None:
    with supervisor(tmp_path, redis_url, ["--workers", "2"]) as sup:
        pids = sup.wait_ready(2)

        def title(pid: int) -> str:
            return " ".join(psutil.Process(pid).cmdline()).strip()  # setproctitle pads

        assert title(sup.pid) == ("stagedoor-supervise: supervisor of 2 workers, stream jobs, "
                                  "group workers")
        for slot, pid in pids.items():
            assert title(pid) == (f"stagedoor-supervise: worker slot {slot} (sup-0{slot}), "
                                  "stream jobs")
        sup.signal(signal.SIGTTIN)
        wait_for(lambda: "supervisor of 3 workers" in title(sup.pid), 10, 0.05, "new title")
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def test_metrics_port_taken_exits_78(tmp_path: Path, redis_url: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with supervisor(tmp_path, redis_url, ["--metrics-port", str(port)]) as sup:
            assert sup.wait() == 78
            assert "cannot listen for metrics" in sup.stderr()
            assert not sup.children()


# -- shutdown bounds ----------------------------------------------------------------------------

def test_graceful_timeout_bounds_the_stop_and_leaves_the_job_pending(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    with supervisor(tmp_path, redis_url, ["--workers", "1", "--graceful-timeout", "0.5"],
                    env={"SUP_TEST_SLOW": "30"}) as sup:
        sup.wait_ready(1)
        enqueue(redis_url, "slow", [4])
        wait_for(lambda: marks(sup, 4), what="slow job start")
        t0 = time.monotonic()
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0
        record("sigterm_with_30s_job_graceful_0.5s_to_exit", time.monotonic() - t0)
        assert time.monotonic() - t0 < 10
        assert [e for e, _, _ in marks(sup, 4)] == ["start"]  # cancelled, not acked
        assert [p[1:] for p in pending(sync_redis)] == [("sup-00", 1)]
        assert "did not stop within" not in sup.stderr()  # the worker stopped itself


def test_straggler_that_ignores_sigterm_is_killed(tmp_path: Path, redis_url: str,
                                                  sync_redis: redis.Redis) -> None:
    args = ["--workers", "1", "--graceful-timeout", "0.5", "--heartbeat-timeout", "30"]
    with supervisor(tmp_path, redis_url, args, env={"SUP_TEST_BLOCK": "30"}) as sup:
        pid = sup.wait_ready(1)[0]
        enqueue(redis_url, "block", [6])  # blocks the worker's loop: SIGTERM goes unheard
        wait_for(lambda: marks(sup, 6), what="blocking job start")
        sup.signal(signal.SIGTERM)
        assert sup.wait(15) == 0
        assert "did not stop within 2.5s: SIGKILL" in sup.stderr()
        assert gone([pid])
        assert [p[1:] for p in pending(sync_redis)] == [("sup-00", 1)]


# -- fork hygiene, in-process ------------------------------------------------------------------

def test_assert_fork_safe_refuses_threads_and_loops() -> None:
    import asyncio
    import threading

    from stagedoor.supervisor.process import ForkUnsafe, assert_fork_safe

    assert_fork_safe()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="intruder")
    t.start()
    try:
        with pytest.raises(ForkUnsafe, match="intruder"):
            assert_fork_safe()
    finally:
        stop.set()
        t.join()

    async def inside_loop() -> None:
        with pytest.raises(ForkUnsafe, match="asyncio loop"):
            assert_fork_safe()

    asyncio.run(inside_loop())


def test_sighup_rereads_the_config_file_and_keeps_the_old_one_if_bad(
        tmp_path: Path, redis_url: str) -> None:
    toml = tmp_path / "stagedoor.toml"
    toml.write_text("count = 10\n")
    with supervisor(tmp_path, redis_url, ["--workers", "1", "--config", str(toml)]) as sup:
        first = sup.wait_ready(1)[0]
        enqueue(redis_url, "settingsdump", [1])
        wait_for(lambda: "done" in mark_text(sup, 1), what="first dump")
        assert "count=10 consumer=sup-00" in mark_text(sup, 1)

        def rolled_from(pid: int) -> int | None:
            # One snapshot for both facts (two reads could pair a stale "not reloading"
            # with the new pid), and the old worker gone: until it exits it may still
            # take a job with the old settings, by design (it drains what it read).
            st = sup.status()
            now = sup.ready_pids(st).get(0)
            done = not st["reloading"] and now not in (None, pid) and gone([pid])
            return now if done else None

        toml.write_text('count = "many"\n')
        sup.signal(signal.SIGHUP)
        second = wait_for(lambda: rolled_from(first), 15, what="rolling restart, bad file")
        assert "SIGHUP: config not reloaded" in sup.stderr()
        enqueue(redis_url, "settingsdump", [2])
        wait_for(lambda: "done" in mark_text(sup, 2), what="second dump")
        assert "count=10 " in mark_text(sup, 2)  # the running settings were kept

        toml.write_text("count = 3\nmetrics_host = '127.0.0.2'\n")
        sup.signal(signal.SIGHUP)
        wait_for(lambda: rolled_from(second), 15, what="rolling restart, good file")
        assert "SIGHUP: metrics_host changed; that takes a restart" in sup.stderr()
        enqueue(redis_url, "settingsdump", [3])
        wait_for(lambda: "done" in mark_text(sup, 3), what="third dump")
        assert "count=3 consumer=sup-00" in mark_text(sup, 3)
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def test_sighup_with_a_broken_deploy_keeps_the_old_workers(tmp_path: Path,
                                                          redis_url: str) -> None:
    toml = tmp_path / "stagedoor.toml"
    toml.write_text('handlers = ["tests.support.handlers.basic:registry"]\n')
    with supervisor(tmp_path, redis_url, ["--workers", "2", "--config", str(toml)],
                    handlers=False) as sup:
        old = sup.wait_ready(2)
        # the "deploy": a handler module that does not load
        toml.write_text('handlers = ["tests.support.handlers.basic:nope"]\n')
        sup.signal(signal.SIGHUP)
        wait_for(lambda: "rolling restart abandoned" in sup.stderr(), 15,
                 what="the broken replacement to be noticed")
        assert "has no 'nope'" in sup.stderr()
        wait_for(lambda: not sup.status()["reloading"], what="reload state cleared")
        assert sup.ready_pids() == old  # the old workers keep serving
        assert len(sup.status()["processes"]) == 2
        enqueue(redis_url, "noop", [1, 2, 3])
        wait_for(lambda: all("done" in mark_text(sup, i) for i in (1, 2, 3)),
                 what="jobs handled by the old workers")
        assert sup.status()["restarts"] == 0
        # a crash after that respawns with the settings that work, not the broken ones
        os.kill(old[1], signal.SIGKILL)
        wait_for(lambda: sup.ready_pids().get(1) not in (None, old[1]), 10,
                 what="respawn with the running settings")
        assert sup.status()["restarts"] == 1
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def test_acl_that_refuses_a_boot_command_exits_78(tmp_path: Path,
                                                  own_redis: EmbeddedRedis) -> None:
    admin = redis.Redis.from_url(own_redis.url, protocol=2)
    try:
        admin.execute_command("ACL", "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all",
                              "-xgroup|create")
    finally:
        admin.close()
    url = f"redis://limited:pw@127.0.0.1:{own_redis.port}/0"
    with supervisor(tmp_path, url, ["--workers", "1"]) as sup:
        assert sup.wait(20) == 78
        assert "Redis refused a command" in sup.stderr(), sup.stderr()[-2000:]
