"""stream/resp.py: the lean connection's time limits, one timer per connection.

The server is made to hold its replies with CLIENT PAUSE for 1.5 s (a real stall: every
client's commands wait), so a call's limit runs out for real."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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
