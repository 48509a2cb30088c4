"""The `sentinels` fixture: a master, two replicas and three Sentinels of our own
(tests/support/topology.py's SentinelSet), stopped after the test.  Offered to every test by
tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.topology import SentinelSet


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    topo = SentinelSet(tmp_path / "sentinel")
    try:
        yield topo
    finally:
        topo.stop()
