"""A lean asyncio Redis connection for the worker's hot path, parsed by hiredis.

Why not redis-py here: each redis-py asyncio command pays client overhead before and
after the round trip, several times the round trip on loopback (the retry wrapper,
the pool, redis-py 8's per-command observability hooks, and an asyncio.wait_for task
per write when a socket timeout is set; docs/benchmarks.md, "Why the code is the way it is").
The worker sends two commands in a loop, XREADGROUP '>' and XACK, thousands of
times a second; everything else (scripts, XAUTOCLAIM, the order store) stays on
redis-py.  Over an asyncio.Protocol (wire.py): the calls of one loop iteration in one
write (at its end), replies parsed by hiredis in data_received and handed to a future
or a Hook, and one timer per connection for the time limits of all its calls
(deadlines.py).

Semantics the loop relies on:
- a timeout or a lost connection fails every outstanding call with redis-py's
  TimeoutError/ConnectionError and drops the connection (its reply order is no
  longer known); the next call reconnects;
- an error reply raises redis.ResponseError with Redis's text (NOGROUP ...);
- the handshake (AUTH, SELECT, CLIENT SETNAME, CLIENT ID) runs on every connect, so
  `client_id` is always that of the live connection (CLIENT UNBLOCK at shutdown);
- with a redis+sentinel:// URL each connect asks the sentinels for the current master;
  a reply that says this server is no longer the master (errors.is_demoted: READONLY,
  MASTERDOWN, the "UNBLOCKED ... master -> replica" a demoted master sends to a blocked
  XREADGROUP) drops the connection and fails the call with MasterChanged, a
  ConnectionError, so the loop retries as for any outage and the next connect finds
  the new master;
- with a redis+cluster:// URL it connects to the master of the stream's slot (CLUSTER
  SLOTS on a seed); MOVED reconnects to the node named, ASK too, and then sends
  ASKING before each command until the migration is over (stream/cluster.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
import redis
from redis.connection import parse_url

from ..config import Settings
from . import auth, cluster, sentinel
from .deadlines import Deadlines
from .errors import MasterChanged
from .wire import Hook, Protocol

__all__ = ["Exchange", "FastConnection", "MasterChanged"]  # MasterChanged: tests import it here

# What write_many() returns: the futures of the replies, in order.  The time limit runs
# over the whole exchange: its last reply must come within it.
Exchange = list[asyncio.Future[Any]]


class FastConnection:
    """One Redis connection; `await call(...)` sends a command and returns its reply."""

    def __init__(self, settings: Settings, *, timeout: float, name: str = "") -> None:
        self._settings = settings
        self._timeout = timeout
        self._name = name
        self._proto: Protocol | None = None
        self._connecting: asyncio.Future[None] | None = None
        self._packed: dict[tuple[Any, ...], bytes] = {}
        self._deadlines = Deadlines()
        self.client_id: int | None = None

    @property
    def connected(self) -> bool:
        return self._proto is not None and self._proto.usable

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop of the live connection (its calls' futures are of it)."""
        assert self._proto is not None, "not connected"
        return self._proto.loop

    def packed(self, *args: Any) -> bytes:
        """Pack once, reuse: the loop sends the same XREADGROUP over and over."""
        data = self._packed.get(args)
        if data is None:
            data = self._packed[args] = hiredis.pack_command(args)
        return data

    async def call(self, *args: Any, limit: float | None = None) -> Any:
        return await self.send(hiredis.pack_command(args), limit=limit)

    async def send(self, data: bytes, *, limit: float | None = None) -> Any:
        """Send one packed command and await its reply."""
        if not self.connected:
            await self.connect()
        proto = self._proto
        assert proto is not None
        loop = proto.loop
        fut = proto.write(data, loop)
        self._deadlines.add(proto, fut, self._timeout if limit is None else limit, loop)
        return await fut

    def write_many(self, datas: list[bytes], *, limit: float | None = None) -> Exchange:
        """Send several packed commands in one write now, on a connected connection, and
        return without waiting: `await replies(exchange)` later.  Exchanges written one
        after another are answered in that order (the reader's read-ahead)."""
        proto = self._proto
        assert proto is not None and proto.usable, "write_many needs a live connection"
        loop = proto.loop
        futs = proto.write_many(datas, loop)
        self._deadlines.add(proto, futs[-1], self._timeout if limit is None else limit, loop)
        return futs

    def write_hooked(self, datas: list[bytes], hooks: list[Hook], *,
                     limit: float | None = None) -> None:
        """write_many() whose replies are handed to `hooks` as they are parsed, inside
        the protocol's data_received; the time limit runs to the last one's."""
        proto = self._proto  # the caller saw `connected` (not asked again: 3 calls a read)
        assert proto is not None, "write_hooked needs a live connection"
        proto.write_hooked(datas, hooks)
        self._deadlines.add(proto, hooks[-1], self._timeout if limit is None else limit,  # type: ignore[arg-type]
                            proto.loop)

    @staticmethod
    async def replies(futs: Exchange) -> list[Any]:
        """A reply or the ResponseError per command of an exchange; any other failure
        (a timeout, a lost connection) raises, and marks every reply retrieved.

        The replies come in order and a failed connection fails them all, so once the
        last is in, so are the others: one wait per exchange, not one per command."""
        try:
            last = futs[-1]
            if not last.done():
                try:  # noqa: SIM105 - once a read: no context manager on the hot path
                    await last
                except Exception:
                    pass  # taken() returns it or raises it, with the others
            for fut in futs:
                if not fut.done():  # not reached while replies come in order
                    await asyncio.wait([fut])
            return FastConnection.taken(futs)
        except BaseException:
            FastConnection.retrieved(futs)
            raise

    @staticmethod
    def taken(futs: Exchange) -> list[Any]:
        """The replies of an exchange whose replies are all in: a reply or the
        ResponseError per command; any other failure (the connection's) raises."""
        out: list[Any] = []
        for fut in futs:
            error = fut.exception()
            if error is None:
                out.append(fut.result())
            elif isinstance(error, redis.ResponseError):
                out.append(error)
            else:
                raise error
        return out

    @staticmethod
    def retrieved(futs: Exchange) -> None:
        """The connection failed them all: mark them retrieved (no "never retrieved")."""
        for fut in futs:
            if fut.done() and not fut.cancelled():
                fut.exception()

    # -- connecting --------------------------------------------------------------------
    async def connect(self) -> None:
        if self._connecting is not None:
            await asyncio.shield(self._connecting)
            return
        loop = asyncio.get_running_loop()
        self._connecting = connecting = loop.create_future()
        try:
            proto = await asyncio.wait_for(self._open(),
                                           self._settings.connect_timeout + self._timeout)
        except BaseException as e:
            # Other tasks waiting on this connect get a ConnectionError (they retry as
            # after any failed connect).  The task whose connect was cancelled gets its
            # CancelledError back, unchanged: a cancel is a stop, and turned into a
            # retryable error it would be swallowed by a retry loop (a worker told to
            # stop while it boots would boot and read on, issue 24).
            error: Exception = e if isinstance(e, Exception) else \
                redis.ConnectionError("connect cancelled")
            if isinstance(e, TimeoutError):
                error = redis.TimeoutError(f"connecting to Redis timed out: {e}")
            elif isinstance(e, OSError):
                error = redis.ConnectionError(f"cannot connect to Redis: {e}")
            connecting.set_exception(error)
            connecting.exception()  # retrieved: no "never retrieved" warning
            if error is e or not isinstance(e, Exception):
                raise
            raise error from None
        else:
            self._proto = proto
            connecting.set_result(None)
        finally:
            self._connecting = None

    async def _open(self) -> Protocol:
        options = self._options()
        if options.get("sentinel"):
            options["host"], options["port"] = await sentinel.discover_master(self._settings)
        asking = False
        if options.get("cluster"):
            last = self._proto.redirected if self._proto is not None else None
            if last is not None:  # MOVED/ASK named the node; else ask the slot map
                assert self._proto is not None
                self._proto.redirected = None  # once: if that node fails, ask again
                kind, options["host"], options["port"] = last
                asking = kind == "ASK"
            else:
                options["host"], options["port"] = await cluster.stream_node(self._settings)
        loop = asyncio.get_running_loop()
        proto = Protocol(loop)
        try:
            if "path" in options:
                await loop.create_unix_connection(lambda: proto, options["path"])
            else:
                tls = None
                if options.get("tls"):
                    tls = auth.tls_context(options)  # shared: built once per process
                await loop.create_connection(lambda: proto, options.get("host", "localhost"),
                                             int(options.get("port", 6379)), ssl=tls)
            username, password = auth.credentials(self._settings, options)
            handshake: list[tuple[Any, ...]] = []
            if password:
                handshake.append(("AUTH", username, password) if username
                                 else ("AUTH", password))
            if options.get("db"):
                handshake.append(("SELECT", int(options["db"])))
            if self._name:
                handshake.append(("CLIENT", "SETNAME", self._name))
            handshake.append(("CLIENT", "ID"))
            futs = [proto.write(hiredis.pack_command(cmd), loop) for cmd in handshake]
            replies = await asyncio.gather(*futs)
        except BaseException:
            proto.fail(redis.ConnectionError("handshake failed"))
            raise
        self.client_id = int(replies[-1])
        proto.asking = asking
        return proto

    def _options(self) -> dict[str, Any]:
        """Where and how to connect: the URL's options, the master's address under Sentinel."""
        url = self._settings.redis_url
        if cluster.is_cluster_url(url):
            seeds = cluster.parse(url)
            return {**seeds.options, "tls": seeds.tls, "username": seeds.username,
                    "password": seeds.password, "cluster": True}
        if sentinel.is_sentinel_url(url):
            target = sentinel.parse(url)
            return {**target.options, "tls": target.tls, "db": target.db,
                    "username": target.username, "password": target.password,
                    "sentinel": True}
        options = dict(parse_url(url))
        options["tls"] = url.startswith("rediss:")
        return options

    async def aclose(self) -> None:
        self._deadlines.cancel()
        if self._proto is not None:
            self._proto.fail(redis.ConnectionError("connection closed"))
            self._proto = None
