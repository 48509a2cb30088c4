"""Test fixtures: a real redis-server of our own on a free loopback port.

Never the machine's Redis on 6379 and never a mock: the session starts one server,
and every test starts from an empty database on it.  Tests that restart or pause
Redis take `own_redis`, a server of their own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from tests.aclmode import server_args

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import EmbeddedRedis


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path_factory.mktemp("redis"), extra_args=server_args()) as server:
        yield server


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "own-redis", appendonly=True, appendfsync="always",
                           extra_args=server_args())
    server.start()
    try:
        yield server
    finally:
        server.resume()
        server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> Iterator[str]:
    client = redis.Redis.from_url(redis_server.url, protocol=2)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    """Seed defaults, pointed at the test server, writing under tmp_path."""
    return Settings(redis_url=redis_url, tickets_dir=str(tmp_path / "tickets"),
                    state_dir=str(tmp_path / "state"), consumer="test")


@pytest.fixture
def sync_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, protocol=2)
    yield client
    client.close()


@pytest.fixture
async def aredis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url, protocol=2)
    yield client
    await client.aclose()


def pytest_configure(config: pytest.Config) -> None:
    # Subprocesses started by tests (workers, supervisors) must not inherit a
    # systemd notify socket from the developer's session.
    os.environ.pop("NOTIFY_SOCKET", None)


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item
                                   ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The in-process worker tests run on uvloop, as production does."""
    import uvloop

    return {"uvloop": uvloop.new_event_loop}
