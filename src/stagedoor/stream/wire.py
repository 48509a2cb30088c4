"""One connection's wire for the lean client (resp.py): replies parsed by hiredis in
data_received and handed, in order, to what waits for each: a future, or a Hook that
handles the reply where it is parsed (the reader's reads ahead, worker/readahead.py).
Single commands (write) are held until the end of the loop iteration and sent together:
the jobs that resumed together send their next commands in one write.

A reply that says the server moved the stream's slot (MOVED/ASK) or is no longer the
master (errors.is_demoted: READONLY, MASTERDOWN, UNBLOCKED ... replica, WAIT ... replica
instances) fails that call and every other, and drops the connection: the reply order
is lost, and the next call reconnects (resp.py).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, cast

import hiredis
import redis

from . import cluster
from .errors import MasterChanged, is_demoted

_NO_REPLY = False  # what hiredis.Reader.gets() returns when no whole reply is buffered
_ASKING = hiredis.pack_command(("ASKING",))


def _ignore(reply: Any) -> None:
    pass


class Hook:
    """Stands where a reply's future would in a connection's queue of waiters: the reply
    (or the error, a redis.ResponseError or the connection's failure) is handed to `fn`
    inside data_received, as it is parsed.  No future, no task step, no event-loop turn
    between a reply and its handling: the reader's read-ahead (worker/readahead.py,
    whose hooks subclass this and override set_result instead of carrying a closure).
    `fn` must not raise.  cancel() makes the reply be dropped."""

    __slots__ = ("_done", "fn")

    def __init__(self, fn: Callable[[Any], None]) -> None:
        self.fn = fn
        self._done = False

    def done(self) -> bool:
        return self._done

    def cancel(self) -> bool:
        self._done = True
        return True

    def set_result(self, reply: Any) -> None:
        self._done = True
        self.fn(reply)

    def set_exception(self, error: BaseException) -> None:
        self.set_result(error)


class Protocol(asyncio.Protocol):
    """One TCP/TLS/unix connection: replies parsed by hiredis, matched to waiters in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # The loop it was made on, for the futures of its calls, kept rather than asked:
        # asyncio.get_running_loop() is a getpid() system call on Python 3.11 (its fork
        # check; docs/benchmarks.md, "Why the code is the way it is").
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self.waiters: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.asking = False  # cluster: ASKING before every command (a slot migrating here)
        self.redirected: tuple[str, str, int] | None = None  # the last MOVED/ASK
        # single commands written in this loop iteration, sent together at its end
        # (write): the jobs that resume together send their commands in one write, and
        # Redis reads them in one read
        self._corked: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports quack like asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        while True:
            reply = reader.gets()
            if reply is _NO_REPLY:
                return
            if not self.waiters:  # a reply nobody waits for: the stream is out of step
                self.fail(redis.ConnectionError("unexpected reply from Redis"))
                return
            fut = self.waiters.popleft()
            if fut.done():
                continue
            if isinstance(reply, hiredis.ReplyError):
                moved = cluster.redirect(str(reply))
                error: redis.ConnectionError | None = None
                if moved is not None:  # the stream's slot is served elsewhere: go there
                    self.redirected = moved
                    error = cluster.Redirected(str(reply), *moved)
                elif is_demoted(str(reply)):  # a replica now: find the master again
                    error = MasterChanged(f"{reply} (finding the master again)")
                if error is not None:
                    # Every later reply is from the wrong server too: fail this call and
                    # all others and drop the connection; the next call reconnects.
                    fut.set_exception(error)
                    self.fail(error)
                    return
                fut.set_exception(redis.ResponseError(str(reply)))
            else:
                fut.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(redis.ConnectionError(f"connection to Redis lost: {exc or 'closed'}"))

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def fail(self, exc: Exception) -> None:
        """Fail every outstanding call and drop the connection: its reply order is lost."""
        waiters, self.waiters = self.waiters, collections.deque()
        self._corked = []   # their commands: failed with them, never sent
        for fut in waiters:
            if not fut.done():
                fut.set_exception(exc)
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.abort()

    def write_many(self, datas: list[bytes], loop: asyncio.AbstractEventLoop
                   ) -> list[asyncio.Future[Any]]:
        assert self.transport is not None
        if self.asking:
            futs = [self._waiter(loop) for _ in datas]
            self.transport.write(self._uncorked(b"".join(_ASKING + d for d in datas)))
            return futs
        # the reader's every read: no method call per reply
        futs = [loop.create_future() for _ in datas]
        self.waiters.extend(futs)
        self.transport.write(self._uncorked(b"".join(datas)))
        return futs

    def write_hooked(self, datas: list[bytes], hooks: list[Hook]) -> None:
        """write_many() whose replies go to hooks, called inside data_received."""
        assert self.transport is not None
        if self.asking:
            for hook in hooks:
                self.waiters.append(Hook(_ignore))  # type: ignore[arg-type]  # +OK of ASKING
                self.waiters.append(hook)  # type: ignore[arg-type]
            self.transport.write(self._uncorked(b"".join(_ASKING + d for d in datas)))
            return
        self.waiters.extend(hooks)  # type: ignore[arg-type]
        self.transport.write(self._uncorked(b"".join(datas)))

    def write(self, data: bytes, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
        """One command, sent at the end of this loop iteration with the others written
        in it (one write, where each was one system call and one wake-up of Redis)."""
        assert self.transport is not None
        fut = self._waiter(loop)
        if not self._corked:
            loop.call_soon(self._uncork)
        self._corked.append(_ASKING + data if self.asking else data)
        return fut

    def _uncork(self) -> None:
        corked, self._corked = self._corked, []
        if corked and self.transport is not None:
            self.transport.write(corked[0] if len(corked) == 1 else b"".join(corked))

    def _uncorked(self, data: bytes) -> bytes:
        """`data` after the single commands still corked (their replies come first)."""
        if not self._corked:
            return data
        corked, self._corked = self._corked, []
        return b"".join((*corked, data))

    def _waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
        """A future for the next reply (after the +OK of ASKING, which nobody awaits)."""
        if self.asking:
            ok: asyncio.Future[Any] = loop.create_future()
            ok.add_done_callback(lambda f: f.cancelled() or f.exception())
            self.waiters.append(ok)
        fut: asyncio.Future[Any] = loop.create_future()
        self.waiters.append(fut)
        return fut
