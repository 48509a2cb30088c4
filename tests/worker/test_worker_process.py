"""A real worker process (`stagedoor work`) killed with SIGKILL mid-handler."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from tests.support.aclmode import worker_url
from tests.support.cli import cli
from tests.support.paths import SRC
from tests.support.worker import add_jobs, pending_summary, poll

ROOT = Path(__file__).parents[2]


def start_worker(settings: Settings, tmp: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}:{ROOT}", "CRASH_TEST_DIR": str(tmp),
           "STAGEDOOR_REDIS_URL": worker_url(settings.redis_url), "STAGEDOOR_CONSUMER": "crash",
           "STAGEDOOR_LOG_FORMAT": "json"}
    return subprocess.Popen(
        [sys.executable, "-m", "stagedoor.cli", "work", "--slot", "0", "--handlers",
         "tests.support.handlers.crash:registry", "--block-ms", "200", "--job-timeout", "20",
         *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_kill_9_mid_handler_leaves_the_entry_pending_and_it_is_handled_again(
        settings: Settings, sync_redis: redis.Redis, tmp_path: Path) -> None:
    [entry] = add_jobs(settings, "slow", [41])
    first = start_worker(settings, tmp_path)
    try:
        poll(lambda: list(tmp_path.glob("start-41-*")), 20, "first run started")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()
    assert not list(tmp_path.glob("done-*"))
    # Still delivered to the dead worker's name, never acknowledged: not lost.
    assert pending_summary(sync_redis, settings) == (1, {"crash-00": 1})
    (tmp_path / "release").touch()
    second = start_worker(settings, tmp_path, "--burst")   # same slot, same name
    _out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err.decode()
    assert len(list(tmp_path.glob("start-41-*"))) == 2
    assert len(list(tmp_path.glob(f"done-41-{second.pid}"))) == 1
    assert pending_summary(sync_redis, settings)[0] == 0
    # The restart found it on its own pending list (id 0), not by a reclaim.
    assert "handled 1," in err.decode() and "recovered 1" in err.decode()
    assert entry


@pytest.mark.server
def test_wrong_password_is_a_config_error_not_an_outage(tmp_path: Path) -> None:
    """redis-py files a refused AUTH under ConnectionError; retrying it would only
    turn a bad credential into exit 69 after boot_timeout."""
    from tests.support.servers import SuiteRedis as EmbeddedRedis

    with EmbeddedRedis(tmp_path / "auth-redis", password="right-password") as server:
        url = f"redis://:wrong-password@127.0.0.1:{server.port}/0"
        r = cli("work", "--burst", "--boot-timeout", "20", env={"STAGEDOOR_REDIS_URL": url})
    assert r.returncode == 78, r.stderr
    assert "Redis refused the credentials" in r.stderr
    assert "wrong-password" not in r.stderr
