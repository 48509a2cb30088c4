"""Run `stagedoor` with a deliberate slowdown patched in, to prove perfcheck catches it.

    python -m bench.slowdown --inject ack-sleep-ms=0.5 -- work --burst --redis-url ...

Nothing in src/ is edited: this module monkeypatches the imported worker in this
process only, then runs the normal `stagedoor` command line (stagedoor.cli.main.main).

  ack-sleep-ms=X     await asyncio.sleep(X ms) before every write carrying an XACK on the
                     Acker's connection and on the reader's (where XACK rides along
                     with the next XREADGROUP)
  read-sleep-ms=X    await asyncio.sleep(X ms) before every write carrying an XREADGROUP
  handle-cpu-us=X    burn X us of CPU per entry, in the worker's fast path (FastDispatch.run)
                     and in parse_job (a hot-path CPU regression, like an accidental
                     O(n) in the handler path)
  reply-turns=N      the read-ahead's wait for a due reply fixed instead of learned
                     (worker/readahead.py, ReplyWait): 0 always sleeps in epoll, N > 0
                     always turns the loop up to N times first (what the reader did
                     before: 16); bench/measure_slow_redis.py compares them
  reply-stats=1      print, at exit, how the read-ahead's waits ended (n_present: the
                     reply was in at the first turn; n_near: it came during the turns;
                     n_late: the turns ran out; n_slept: plain waiting)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import time
from collections.abc import Sequence
from typing import Any

KNOWN = ("ack-sleep-ms", "read-sleep-ms", "handle-cpu-us", "reply-turns", "reply-stats")


async def delay(seconds: float) -> None:
    """Wait `seconds` without blocking the loop, also below 1 ms.

    uvloop (libuv) timers have millisecond resolution and round a sub-millisecond
    delay down: `await asyncio.sleep(0.0005)` returns after ~12 us on uvloop, so a
    patched-in `asyncio.sleep(0.0005)` would slow nothing.  Below 1 ms the wait runs
    in a thread (time.sleep is accurate to ~60 us here); the loop keeps running."""
    if seconds >= 0.001:
        await asyncio.sleep(seconds)
    elif seconds > 0:
        await asyncio.get_running_loop().run_in_executor(None, time.sleep, seconds)


class _SlowCommands:
    """A connection proxy: sleeps before the named command, the rest passes through.

    Covers both shapes the worker has used: a redis-py client (`execute_command`) and
    the lean hot-path connection of stagedoor.stream.resp (`call`, `send`,
    and `write_many` + `replies`, the reader's reads ahead)."""

    def __init__(self, inner: Any, command: str, delay_s: float) -> None:
        self._inner, self._command, self._delay = inner, command, delay_s
        self._slow: set[int] = set()  # exchanges written by write_many() that carry it
        self._later: collections.deque[tuple[list[bytes], list[Any], dict[str, Any]]] = \
            collections.deque()  # writes put off by write_hooked(), oldest first

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _maybe_sleep(self, args: tuple[Any, ...]) -> None:
        if args and str(args[0]).upper() == self._command:
            await delay(self._delay)

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        await self._maybe_sleep(args)
        return await self._inner.execute_command(*args, **kwargs)

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        await self._maybe_sleep(args)
        return await self._inner.call(*args, **kwargs)

    # pre-packed RESP commands (stagedoor.stream.resp.FastConnection.send)
    async def send(self, data: bytes, **kwargs: Any) -> Any:
        await self._maybe_sleep((_packed_name(data),))
        return await self._inner.send(data, **kwargs)

    # the reader's reads ahead: written at once, the replies awaited later.  The write
    # cannot wait (it is not a coroutine), so the wait comes before the replies are
    # taken: the same time added to each exchange that carries the command.
    def write_many(self, datas: list[bytes], **kwargs: Any) -> Any:
        exchange = self._inner.write_many(datas, **kwargs)
        if any(_packed_name(d) == self._command for d in datas):
            self._slow.add(id(exchange[0]))
        return exchange

    async def replies(self, exchange: Any) -> Any:
        if id(exchange[0]) in self._slow:
            self._slow.discard(id(exchange[0]))
            await delay(self._delay)
        return await self._inner.replies(exchange)


    # the reader's reads ahead since the replies are handled in data_received
    # (worker/readahead.py): nothing awaits them, so the write itself is put off by the
    # delay, in the order the writes were asked for (the replies must come in that order).
    def write_hooked(self, datas: list[bytes], hooks: list[Any], **kwargs: Any) -> None:
        if not any(_packed_name(d) == self._command for d in datas):
            self._inner.write_hooked(datas, hooks, **kwargs)
            return
        self._later.append((datas, hooks, kwargs))
        loop = self._inner.loop
        if self._delay >= 0.001:
            loop.call_later(self._delay, self._write_oldest)
        else:  # uvloop rounds a sub-millisecond timer down (see delay())
            loop.run_in_executor(None, time.sleep, self._delay).add_done_callback(
                lambda _: self._write_oldest())

    def _write_oldest(self) -> None:
        datas, hooks, kwargs = self._later.popleft()
        try:
            self._inner.write_hooked(datas, hooks, **kwargs)
        except Exception as e:  # the connection went meanwhile: the replies fail
            for hook in hooks:
                hook.set_exception(ConnectionError(f"bench.slowdown: {e}"))


def _packed_name(data: bytes) -> str:
    """The command name of one RESP-packed command: *N CRLF $len CRLF NAME CRLF ..."""
    parts = bytes(data[:64]).split(b"\r\n", 3)
    return parts[2].decode(errors="replace").upper() if len(parts) > 2 else ""


def _wrap_fast_connection(worker: Any, command: str, delay: float, *, read_only: bool) -> None:
    """Wrap the worker's hot-path connections (stagedoor.stream.resp), where it has them.

    read_only: only the reader's connection (name ending ':read'); the Acker's own
    connection is wrapped through Acker.__init__."""
    fast = getattr(worker, "FastConnection", None)
    if fast is None:
        return

    def fast_connection(*args: Any, **kwargs: Any) -> Any:
        conn = fast(*args, **kwargs)
        if read_only and not str(kwargs.get("name", "")).endswith(":read"):
            return conn
        return _SlowCommands(conn, command, delay)

    worker.FastConnection = fast_connection


def parse_specs(specs: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or name not in KNOWN:
            raise SystemExit(f"bench.slowdown: bad --inject {spec!r}; known: "
                             + ", ".join(f"{k}=N" for k in KNOWN))
        out[name] = float(value)
    return out


def install(specs: Sequence[str]) -> dict[str, float]:
    """Patch the worker's parts (stagedoor.worker.*) in this process according to the specs."""
    from stagedoor.stream import connection
    from stagedoor.worker import acks, dispatch, entries
    from stagedoor.worker import loop as worker

    conf = parse_specs(specs)
    if "ack-sleep-ms" in conf:
        delay = conf["ack-sleep-ms"] / 1000
        orig_init = acks.Acker.__init__

        def acker_init(self: Any, conn: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(self, _SlowCommands(conn, "XACK", delay), *args, **kwargs)

        acks.Acker.__init__ = acker_init  # type: ignore[method-assign]
        _wrap_fast_connection(worker, "XACK", delay, read_only=True)
    if "read-sleep-ms" in conf:
        delay_r = conf["read-sleep-ms"] / 1000
        orig_client = connection.async_client

        def async_client(*args: Any, **kwargs: Any) -> Any:
            return _SlowCommands(orig_client(*args, **kwargs), "XREADGROUP", delay_r)

        connection.async_client = async_client  # type: ignore[assignment]
        _wrap_fast_connection(worker, "XREADGROUP", delay_r, read_only=False)
    if "handle-cpu-us" in conf:
        burn = conf["handle-cpu-us"] / 1e6
        orig_parse = dispatch.parse_job

        def parse_job(*args: Any, **kwargs: Any) -> Any:
            end = time.perf_counter() + burn
            while time.perf_counter() < end:
                pass
            return orig_parse(*args, **kwargs)

        dispatch.parse_job = parse_job  # type: ignore[assignment]
        # the common entry takes the C fast path and never reaches parse_job: burn there,
        # per entry of each reply it is given
        class BurningDispatch(entries.FastDispatch):
            def run(self, batch: Any, loop: Any, settled: list[Any]) -> int:
                end = time.perf_counter() + burn * len(batch)
                while time.perf_counter() < end:
                    pass
                return int(super().run(batch, loop, settled))

        dispatch.FastDispatch = BurningDispatch  # type: ignore[attr-defined]
    if "reply-turns" in conf or "reply-stats" in conf:
        import atexit

        from stagedoor.worker import readahead

        turns = int(conf.get("reply-turns", -1))
        made = readahead.ReplyWait
        waits: list[Any] = []

        def wait_of(loop: Any) -> Any:  # turns fixed (>= 0) or learned (-1), and kept
            wait = made(loop)
            wait.fixed = turns
            waits.append(wait)
            return wait

        def report() -> None:
            for w in waits:
                print("reply-stats " + " ".join(
                    f"{k}={getattr(w, k, '?')}" for k in
                    ("n_present", "n_near", "n_late", "n_slept")),
                    file=sys.stderr, flush=True)

        readahead.ReplyWait = wait_of
        if "reply-stats" in conf:
            atexit.register(report)
    return conf


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="python -m bench.slowdown")
    p.add_argument("--inject", action="append", default=[], metavar="NAME=VALUE")
    a = p.parse_args(argv)
    conf = install(a.inject)
    print(f"bench.slowdown: injected {conf}", file=sys.stderr)
    from stagedoor.cli.main import main as stagedoor_main

    return stagedoor_main(rest)


if __name__ == "__main__":
    sys.exit(main())
