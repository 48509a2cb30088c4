"""The time limits of a lean connection's calls (resp.py), kept by one event-loop timer:
a timer per call would cost as much as the rest of a read
(docs/benchmarks.md, "Why the code is the way it is")."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import redis

from .wire import Protocol


class Deadlines:
    """The time limits of a connection's calls, kept by one event-loop timer.

    Each call is (deadline, the future of its last reply, limit, protocol), appended as
    it is written.  The timer is armed for the earliest deadline of a call still
    waiting; when it fires, a call past its deadline fails its connection with a
    TimeoutError (as the timer per call did), and the timer is armed for the next one.
    Calls answered meanwhile are dropped from the front as new ones come, so the queue
    holds about as many as are on the wire."""

    __slots__ = ("_at", "_calls", "_loop", "_timer")

    def __init__(self) -> None:
        self._calls: collections.deque[
            tuple[float, asyncio.Future[Any], float, Protocol]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def add(self, proto: Protocol, fut: asyncio.Future[Any], limit: float,
            loop: asyncio.AbstractEventLoop) -> None:
        calls = self._calls
        while calls and calls[0][1].done():
            calls.popleft()
        deadline = loop.time() + limit
        calls.append((deadline, fut, limit, proto))
        if self._timer is None or deadline < self._at or loop is not self._loop:
            self._arm(deadline, loop)

    def _arm(self, at: float, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._at, self._loop = at, loop
        self._timer = loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        waiting: collections.deque[tuple[float, asyncio.Future[Any], float, Protocol]] = \
            collections.deque()
        for call in self._calls:
            deadline, fut, limit, proto = call
            if fut.done():
                continue
            if deadline <= now:
                proto.fail(redis.TimeoutError(f"Redis did not answer within {limit:g}s"))
            else:
                waiting.append(call)
        # a failed connection failed all its calls: keep only those still waiting
        self._calls = collections.deque(c for c in waiting if not c[1].done())
        if self._calls:
            self._arm(min(c[0] for c in self._calls), loop)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._calls.clear()
