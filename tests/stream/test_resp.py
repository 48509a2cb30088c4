"""stream/resp.py: the lean connection's time limits, one timer per connection.

The server is made to hold its replies with CLIENT PAUSE for 1.5 s (a real stall: every
client's commands wait), so a call's limit runs out for real."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import hiredis
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.stream.resp import FastConnection


@asynccontextmanager
async def stalled(settings: Settings, sync_redis: redis.Redis, limit: float = 2
                  ) -> AsyncIterator[FastConnection]:
    """A connected FastConnection, then the server holds every reply for 1.5 s."""
    conn = FastConnection(settings, timeout=limit)
    try:
        await conn.connect()
        sync_redis.execute_command("CLIENT", "PAUSE", 1500, "ALL")
        try:
            yield conn
        finally:
            sync_redis.execute_command("CLIENT", "UNPAUSE")
        assert await conn.call("PING") == b"PONG"  # and then it works again
    finally:
        await conn.aclose()


async def test_calls_answered_in_time_leave_nothing_behind(settings: Settings) -> None:
    conn = FastConnection(settings, timeout=2)
    try:
        for i in range(200):
            assert await conn.call("ECHO", i) == str(i).encode()
        futs = conn.write_many([b"*1\r\n$4\r\nPING\r\n"] * 3)
        assert await conn.replies(futs) == [b"PONG"] * 3
        # only the calls still on the wire are kept (here: none unanswered)
        assert all(fut.done() for _d, fut, _l, _p in conn._deadlines._calls)
        assert len(conn._deadlines._calls) <= 1
    finally:
        await conn.aclose()


async def test_a_call_past_its_limit_fails_and_the_next_one_reconnects(
        settings: Settings, sync_redis: redis.Redis) -> None:
    async with stalled(settings, sync_redis) as conn:
        with pytest.raises(redis.TimeoutError, match=r"within 0\.2s"):
            await conn.call("PING", limit=0.2)
        assert not conn.connected  # its reply order is lost: dropped


async def test_a_short_limit_behind_a_long_one_runs_out_at_its_own_time(
        settings: Settings, sync_redis: redis.Redis) -> None:
    async with stalled(settings, sync_redis) as conn:
        long = asyncio.ensure_future(conn.call("PING", limit=30))
        await asyncio.sleep(0)
        with pytest.raises(redis.TimeoutError, match=r"within 0\.2s"):
            await conn.call("PING", limit=0.2)
        # the connection is dropped: the long call fails with it, not after 30 s
        with pytest.raises(redis.TimeoutError, match=r"within 0\.2s"):
            await long


async def test_every_exchange_of_a_read_ahead_fails_together(
        settings: Settings, sync_redis: redis.Redis) -> None:
    async with stalled(settings, sync_redis, limit=0.2) as conn:
        first = conn.write_many([b"*1\r\n$4\r\nPING\r\n"])
        second = conn.write_many([b"*1\r\n$4\r\nPING\r\n", b"*1\r\n$4\r\nPING\r\n"])
        for exchange in (first, second):
            with pytest.raises(redis.TimeoutError):
                await conn.replies(exchange)


class _CountingTransport:
    """The real transport, its writes counted (what reaches the socket, and how often)."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


async def test_commands_of_one_loop_iteration_go_out_in_one_write(settings: Settings) -> None:
    """The jobs that resume together (one read of replies) send their next commands in
    one write, not one system call (and one wake-up of Redis) each; the replies still
    come to their own callers, in order, with an exchange written after them too."""
    conn = FastConnection(settings, timeout=2)
    try:
        await conn.connect()
        proto = conn._proto
        assert proto is not None
        counting = _CountingTransport(proto.transport)
        proto.transport = counting  # type: ignore[assignment]
        replies = await asyncio.gather(*(conn.call("ECHO", i) for i in range(5)))
        assert replies == [str(i).encode() for i in range(5)]
        assert len(counting.writes) == 1, counting.writes
        # single commands, then an exchange in the same iteration: one write, in order
        counting.writes.clear()
        loop = asyncio.get_running_loop()
        first = proto.write(hiredis.pack_command(("ECHO", "a")), loop)
        futs = conn.write_many([hiredis.pack_command(("ECHO", "b"))])
        assert await conn.replies(futs) == [b"b"] and first.result() == b"a"
        assert counting.writes == [hiredis.pack_command(("ECHO", "a"))
                                   + hiredis.pack_command(("ECHO", "b"))]
        # a connection failed before the end of the iteration sends nothing it held
        counting.writes.clear()
        held = proto.write(hiredis.pack_command(("ECHO", "c")), loop)
        proto.fail(redis.ConnectionError("gone"))
        await asyncio.sleep(0)
        with pytest.raises(redis.ConnectionError):
            held.result()
        assert counting.writes == []
    finally:
        await conn.aclose()
