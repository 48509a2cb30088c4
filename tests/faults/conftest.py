"""Fixtures of the fault suite: a Redis of the test's own, the ledger, processes.

Each test gets its own redis-server (AOF, appendfsync always) because the cases kill,
restart and wipe it, and because the idle check reads its INFO commandstats.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import EmbeddedRedis
from tests.support.aclmode import worker_url
from tests.support.faults.harness import Procs, Producer
from tests.support.faults.invariants import Ledger


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger")


@pytest.fixture
def server(own_redis: EmbeddedRedis) -> EmbeddedRedis:
    return own_redis


@pytest.fixture
def fsettings(server: EmbeddedRedis, tmp_path: Path) -> Settings:
    """What the test side (producer, invariants) uses; workers get flags of their own."""
    return Settings(redis_url=server.url, consumer="f", tickets_dir=str(tmp_path / "tickets"),
                    state_dir=str(tmp_path / "state"))


@pytest.fixture
def client(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    c = redis.Redis(host="127.0.0.1", port=server.port, password=server.password, protocol=2,
                    socket_timeout=5, socket_connect_timeout=5)
    yield c
    c.close()


@pytest.fixture
def procs(tmp_path: Path, server: EmbeddedRedis, ledger: Ledger) -> Iterator[Procs]:
    p = Procs(tmp_path, worker_url(server.url), ledger.directory)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def producer(client: redis.Redis, fsettings: Settings, ledger: Ledger) -> Producer:
    return Producer(client, fsettings, ledger.directory)
