"""Test fixtures: a real redis-server of our own on a free loopback port.

Never the machine's Redis on 6379 and never a mock: the session starts one server,
and every test starts from an empty database on it.  Tests that restart or pause
Redis take `own_redis`, a server of their own.  Which server (Redis 7.0, Valkey 8.1,
Redis 8.2) is SD_TEST_SERVER's choice (tests/support/servers.py); tests that use one are
marked `server` here, so the matrix run (`-m server`) runs exactly those.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import Settings
from tests.support import servers
from tests.support.aclmode import server_args
from tests.support.sentinels import sentinels  # noqa: F401 (a fixture, offered to every test)
from tests.support.servers import SuiteRedis as EmbeddedRedis

# A test that uses any of these talks to a server: marked `server` automatically.
SERVER_FIXTURES = frozenset({"redis_server", "own_redis", "redis_url", "settings",
                             "sync_redis", "aredis", "server", "acl_server", "tls_server",
                             "sentinels"})


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
    # The fonts' coverage cache (render/installed.py) of this run, not the developer's
    # ~/.cache: the tests' temporary font directories would leave a file each there.
    os.environ.pop("CACHE_DIRECTORY", None)
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="sd-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.get("XDG_CACHE_HOME", ""), ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())) \
                or item.get_closest_marker("tls"):
            item.add_marker(pytest.mark.server)


_deselected_tls: list[str] = []


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected_tls.extend(i.nodeid for i in items if i.get_closest_marker("tls"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    servers.current_item = item


def pytest_report_header(config: pytest.Config) -> str:
    return f"server ({servers.VARIABLE}): {servers.SERVER.describe()}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    line = f"server ({servers.VARIABLE}): {servers.SERVER.describe()}"
    if _deselected_tls:
        line += f"; {len(_deselected_tls)} TLS tests deselected"
        if not servers.SERVER.tls:
            line += " (this build has no TLS: they run against SD_TEST_SERVER=redis)"
    terminalreporter.write_line(line)


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item
                                   ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The in-process worker tests run on uvloop, as production does."""
    import uvloop

    return {"uvloop": uvloop.new_event_loop}
