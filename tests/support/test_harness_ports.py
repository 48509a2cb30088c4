"""A port chosen free is taken before the server binds it: the server moves, not the test.

free_port() binds port 0, reads the port and closes it; the server binds it a moment
later, and on a box where two suites start servers (CI's steps, a developer's second
run) another process can take it in between.  Two ways that went wrong:

- a sentinel of tests/support/topology.py whose port was taken exited at once, and the set-up
  waited its 60 s for "three sentinels that see the master and the replica" (a fresh
  clone's run, 2026-12-06): the set-up now starts such a sentinel again on another port
  and, if it still fails, says what each sentinel answered;
- EmbeddedRedis (the demo's server, and every server of the suite) took a PING answer
  from whatever process had its port as its own start: a test could then talk to
  another suite's server while its own had exited.  It now waits for its own process
  (INFO's process_id) and, on its first start, moves to another free port when its
  port was taken; a port the caller named is never changed, and a taken one is a clear
  PortTaken error.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import tests.support.topology as topology
from stagedoor.demo import embedded_redis
from stagedoor.demo.embedded_redis import PortTaken
from tests.support.servers import SuiteRedis


def _first_port_then_free(monkeypatch: pytest.MonkeyPatch, module: object, taken: int
                          ) -> list[int]:
    """Make `module`'s free_port return `taken` once, then really free ports; the ports
    it returned are listed."""
    given: list[int] = []
    real = embedded_redis.free_port

    def free_port(host: str = "127.0.0.1") -> int:
        port = taken if not given else real(host)
        given.append(port)
        return port
    monkeypatch.setattr(module, "free_port", free_port)
    return given


@pytest.fixture
def listener() -> Iterator[int]:
    """A port held by a plain listening socket (not a Redis)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _own_pid(server: SuiteRedis) -> int:
    c = redis.Redis(host="127.0.0.1", port=server.port, protocol=2, socket_timeout=2)
    try:
        return int(c.info("server")["process_id"])
    finally:
        c.close()


@pytest.mark.server
def test_a_server_whose_chosen_port_is_taken_moves_to_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listener: int) -> None:
    given = _first_port_then_free(monkeypatch, embedded_redis, listener)
    server = SuiteRedis(tmp_path / "r").start()
    try:
        assert given[0] == listener and server.port == given[-1] != listener
        assert server.process is not None and _own_pid(server) == server.process.pid
        server.restart()    # a restart keeps its port
        assert server.port == given[-1]
    finally:
        server.stop()


@pytest.mark.server
def test_a_server_that_fails_before_the_first_look_still_moves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listener: int) -> None:
    """On a busy box the server can find its port taken, log it and exit before
    wait_ready first looks (CI, 2026-12-06: "redis-server exited with 1:" and no reason,
    the log read from where the failure had already ended).  Here the start waits for
    the server to exit before it looks."""
    given = _first_port_then_free(monkeypatch, embedded_redis, listener)
    real = subprocess.Popen

    def popen_then_wait(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = real(*args, **kwargs)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2)        # the one whose port is taken exits in milliseconds
        return proc
    monkeypatch.setattr(embedded_redis.subprocess, "Popen", popen_then_wait)
    server = SuiteRedis(tmp_path / "r").start()
    try:
        assert given[0] == listener and server.port == given[-1] != listener
        assert server.process is not None and _own_pid(server) == server.process.pid
    finally:
        server.stop()


@pytest.mark.server
def test_a_server_never_takes_another_server_s_answer_as_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = SuiteRedis(tmp_path / "other").start()
    try:
        _first_port_then_free(monkeypatch, embedded_redis, other.port)
        server = SuiteRedis(tmp_path / "r").start()
        try:
            assert server.port != other.port
            assert server.process is not None and _own_pid(server) == server.process.pid
        finally:
            server.stop()
    finally:
        other.stop()


@pytest.mark.server
def test_a_named_port_that_is_taken_is_a_clear_error(tmp_path: Path, listener: int
                                                     ) -> None:
    server = SuiteRedis(tmp_path / "r", port=listener)
    with pytest.raises(PortTaken, match=f"port {listener} is taken"):
        server.start()
    assert server.port == listener


@pytest.mark.server
def test_a_sentinel_whose_port_was_taken_is_started_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listener: int) -> None:
    # the master and the replica take their ports from embedded_redis; the first
    # sentinel is given the taken one
    given = _first_port_then_free(monkeypatch, topology, listener)
    sentinels = topology.SentinelSet(tmp_path)
    try:
        assert given[0] == listener
        ports = [s.port for s in sentinels.sentinels]
        assert listener not in ports and len(set(ports)) == 3
        assert all(s.master_port() == sentinels.master.port for s in sentinels.sentinels)
    finally:
        sentinels.stop()
