"""pytest-benchmark set-up for bench/: `PYTHONPATH=src:. pytest bench [--bench-quick]`.

A separate invocation from `pytest tests`.  Files named bench_*.py are collected
here.  One redis-server of its own for the session, on a free loopback port (never
the machine's Redis on 6379); each benchmark flushes it first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stagedoor.demo.embedded_redis import EmbeddedRedis


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bench-quick", action="store_true",
                     help="smaller backlogs and shorter runs (smoke run)")


def pytest_collect_file(file_path: Path, parent: Any) -> Any:
    if file_path.suffix == ".py" and file_path.name.startswith("bench_"):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.fixture(scope="session")
def quick(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--bench-quick"))


@pytest.fixture(scope="session")
def bench_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path_factory.mktemp("bench-redis")) as server:
        yield server


@pytest.fixture
def bench_url(bench_redis: EmbeddedRedis) -> str:
    import redis

    c = redis.Redis.from_url(bench_redis.url, protocol=2)
    c.flushall()
    c.close()
    return bench_redis.url
