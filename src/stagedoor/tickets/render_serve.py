"""The render process: renders orders and writes their PDFs for one worker, so that a
crash inside the renderer (a C library's failed assertion: SIGABRT) ends this process
and not the worker (render_host.py is the worker's side and says what it does then).

    python -m stagedoor.tickets.render_serve FD PARENT_PID

Started by the worker (exec'd, not forked: no Redis connection, thread, event loop or
open font of the worker is shared), with one end of a socketpair as FD.  On it, frames
of a 4-byte little-endian length and a body, both ways.  The first frame each way is a
pickle (the two ends are one user's processes, parent and child: pickle is no trust
boundary here); every later one is a fixed struct and bytes (no pickle, no parse of
anything but the order itself):

    worker -> here   (render_threads, the worker's font plan)       first, once, pickle
    here -> worker   ("ready", pid)                                after a warm-up render
    worker -> here   REQUEST: rid, order id, len(directory), len(name); then the
                     directory, the name and the order's JSON as the store holds it
    here -> worker   REPLY: rid, outcome, missing glyphs, tickets; then, unless the
                     outcome is OK with no scripts printed as marks, the JSON of
                     [detail, {script: count}]

The order's JSON is parsed here, once (the worker does not parse it: issue 36), and
checked against the order id it is stored under.  outcome is OK (the PDF's bytes and
directory entry are durable, the same C write as in the worker: render_pool.LocalRender),
FAILED (RenderFailed: detail is the reason), DATA (the JSON is no order of that id:
OrderDataError, detail says why), OSERROR (detail: errno, strerror, filename) or MEMORY.
Several renders are in flight at once on the native pool's threads; the frames sent
(or finished) together in one loop iteration go out in one write (Outbox).

It ends when the worker closes its end (EOF): it finishes the renders it has, replies,
and exits 0.  The worker shuts down only its writing side (render_host.RenderHost.close),
so those replies reach it: a render whose job was cancelled may write its PDF here
after the job ended, and the worker checks that PDF when the reply comes (the order
may have been refunded meanwhile).  So EOF here half-closes: our side stays open for
the replies (Frames(keep_writing=True)).  SIGTERM and SIGINT are ignored (a
terminal's ^C or a signal to the process group is the worker's to act on; it closes
the socket), and the kernel kills it (PR_SET_PDEATHSIG) if the worker dies, even with
renders still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import pickle
import signal
import socket
import struct
import sys
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import uvloop

# at the top, not in the functions that use them: a function-local import is a lookup
# in sys.modules on every call, and request/_written/_reply run for every order
from ..proctitle import set_title
from ..render import fonts, renderer
from ..render.order import Order, OrderDataError, RenderFailed, Ticket
from .files import no_unnamed_files
from .render_pool import LocalRender, missing_glyphs, stored_order, uncovered_scripts

HEADER = struct.Struct("<I")
REQUEST = struct.Struct("<QQHH")    # rid, order id, len(directory), len(name)
REPLY = struct.Struct("<QBiH")      # rid, outcome, missing glyphs, tickets
OK, FAILED, DATA, OSERROR, MEMORY = range(5)
OUTCOMES = ("ok", "failed", "data", "oserror", "memory")
_PR_SET_PDEATHSIG = 1


def frame(obj: Any) -> bytes:
    """A pickled frame: the handshake's, once each way."""
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def request_frame(rid: int, order_id: int, directory: bytes, name: bytes,
                  data: bytes) -> bytes:
    return b"".join((HEADER.pack(REQUEST.size + len(directory) + len(name) + len(data)),
                     REQUEST.pack(rid, order_id, len(directory), len(name)),
                     directory, name, data))


def reply_frame(rid: int, outcome: int, missing: int, tickets: int, detail: Any = None,
                lost: dict[str, int] | None = None) -> bytes:
    extra = b"" if outcome == OK and not lost else orjson.dumps([detail, lost or {}])
    return (HEADER.pack(REPLY.size + len(extra))
            + REPLY.pack(rid, outcome, missing, min(tickets, 0xFFFF)) + extra)


def parse_reply(body: bytes) -> tuple[int, str, Any, int, dict[str, int], int]:
    """(rid, outcome name, detail, missing glyphs, lost scripts, tickets)."""
    rid, outcome, missing, tickets = REPLY.unpack_from(body)
    detail: Any = None
    lost: dict[str, int] = {}
    if len(body) > REPLY.size:
        detail, lost = orjson.loads(body[REPLY.size:])
    return rid, OUTCOMES[outcome], detail, missing, lost, tickets


class Frames(asyncio.Protocol):
    """Length-prefixed frames of a stream socket, each body handed to `on_frame` as it
    is complete (bytes); `closed` resolves when the socket closes (EOF or
    an error).  A protocol, not a StreamReader: a frame costs no coroutine step.
    keep_writing: at EOF the transport stays open for what we still write (the other
    side shut down only its writing side); the caller closes it."""

    def __init__(self, on_frame: Callable[[bytes], None], keep_writing: bool = False) -> None:
        self.on_frame = on_frame
        self.keep_writing = keep_writing
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self._buf = b""     # the start of a frame still incomplete

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport   # type: ignore[assignment]  # uvloop's: no subclass

    def data_received(self, data: bytes) -> None:
        view = self._buf + data if self._buf else data
        pos, n = 0, len(view)
        while n - pos >= 4:
            (size,) = HEADER.unpack_from(view, pos)
            end = pos + 4 + size
            if end > n:
                break
            self.on_frame(view[pos + 4:end])
            pos = end
        self._buf = view[pos:] if pos < n else b""

    def eof_received(self) -> bool | None:
        if not self.keep_writing:
            return None     # the transport closes: connection_lost follows
        if not self.closed.done():
            self.closed.set_result(None)
        return True     # half-closed: the caller writes on, then closes

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class Outbox:
    """Frames written once per loop iteration: the renders sent (or finished) together
    go out in one write, and wake the other side once."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self.transport = transport
        self._frames: list[bytes] = []

    def put(self, data: bytes) -> None:
        if not self._frames:
            asyncio.get_running_loop().call_soon(self._flush)
        self._frames.append(data)

    def _flush(self) -> None:
        frames, self._frames = self._frames, []
        if frames and not self.transport.is_closing():
            self.transport.write(b"".join(frames))

    def close(self) -> None:
        self._flush()
        self.transport.close()


def die_with(parent: int) -> None:
    """SIGKILL from the kernel when the worker dies (it forked us from its main thread,
    which lives as long as it does); if it is already gone, exit now."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _warm_up() -> Order:
    """One Latin ticket: the render at start (not demo/'s orders: importing them would
    lengthen every start)."""
    return Order(order_id=1, tickets=(Ticket(
        event="Warm-up", venue="Stagedoor", starts_at="2026-12-01 19:30", section="Parkett",
        row="1", seat="1", buyer="Stagedoor", price="EUR 0.00", order_id=1,
        admission_code="SD-00000001-01-000000"),))


class Serve:
    def __init__(self, threads: int, plan: Any, out: Outbox) -> None:
        fonts.use(plan)     # the worker's (its settings, its fonts found at its start)
        renderer()(_warm_up())    # a renderer that cannot render at all fails here, at start
        self._threads = ThreadPoolExecutor(threads, thread_name_prefix="render")
        self.local = LocalRender(threads, self._in_thread)
        self._out = out
        self.running: set[asyncio.Task[None]] = set()

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)

    def request(self, body: bytes) -> None:
        """A REQUEST frame: the order parsed (its one parse) and handed to the native
        pool with a callback that replies (no task, no future per order); where the
        pool does not apply (the os.* write), a task (render)."""
        rid, order_id, nd, nn = REQUEST.unpack_from(body)
        at = REQUEST.size
        directory = body[at:at + nd]
        name = body[at + nd:at + nd + nn]
        try:
            order = stored_order(order_id, body[at + nd + nn:])
        except OrderDataError as e:
            self._reply(rid, DATA, str(e), 0)
            return
        except Exception as e:  # what the parse raised beyond a data error
            self._reply(rid, FAILED, str(RenderFailed.of(e)), 0)
            return
        before = missing_glyphs()

        def written(ok: bool, err: BaseException | None) -> None:
            self._written(rid, order, directory, name, before, ok, err)
        try:
            if self.local.submit(order, directory, name, written):
                return
        except Exception as e:      # the pool's submit: RenderFailed, MemoryError
            written(False, e)
            return
        self._spawn(self.render(rid, order, directory, name))

    def _written(self, rid: int, order: Order, directory: bytes, name: bytes,
                 before: int, ok: bool, err: BaseException | None) -> None:
        if err is None and not ok:  # the file system cannot do the unnamed file
            no_unnamed_files()
            self._spawn(self.render(rid, order, directory, name))
        elif err is None and before >= 0 and missing_glyphs() != before:
            self._spawn(self.render(rid, order, directory, name, lost_only=True))
        else:
            self._reply(rid, *_outcome(err), len(order.tickets))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    def _reply(self, rid: int, outcome: int, detail: Any, tickets: int,
               lost: dict[str, int] | None = None) -> None:
        self._out.put(reply_frame(rid, outcome, missing_glyphs(), tickets, detail, lost))

    async def render(self, rid: int, order: Order, directory: bytes, name: bytes,
                     lost_only: bool = False) -> None:
        """The order rendered and written through LocalRender.render_into (or, with
        lost_only, only the scripts it printed as marks looked for), then replied."""
        lost: dict[str, int] = {}
        err: BaseException | None = None
        try:
            if lost_only:
                lost = await self._in_thread(uncovered_scripts, order)
            else:
                lost = await self.local.render_into(order, directory, name)
        except Exception as e:
            err = e
        self._reply(rid, *_outcome(err), len(order.tickets), lost)

    def close(self) -> None:
        self.local.close()
        self._threads.shutdown(wait=True)


def _outcome(err: BaseException | None) -> tuple[int, Any]:
    """The reply's outcome and detail for what a render raised (None: OK)."""
    if err is None:
        return OK, None
    if isinstance(err, RenderFailed):
        return FAILED, str(err)
    if isinstance(err, MemoryError):
        return MEMORY, None
    if isinstance(err, OSError):
        return OSERROR, (err.errno, err.strerror, err.filename)
    # what the renderer's caller raised: the order's error
    return FAILED, str(RenderFailed.of(err if isinstance(err, Exception) else Exception(err)))


async def serve(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    first: asyncio.Future[bytes] = loop.create_future()
    early: list[bytes] = []     # none: the worker waits for "ready"

    def handshake(body: bytes) -> None:
        if first.done():
            early.append(body)
        else:
            first.set_result(body)

    frames = Frames(handshake, keep_writing=True)   # the replies after the worker's EOF
    transport, _ = await loop.create_unix_connection(lambda: frames, sock=sock)
    either: list[asyncio.Future[Any]] = [first, frames.closed]
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    if not first.done():
        return      # the worker stopped before it rendered anything
    threads, plan = pickle.loads(first.result())
    out = Outbox(transport)
    host = Serve(threads, plan, out)
    frames.on_frame = host.request
    for body in early:
        host.request(body)
    transport.write(frame(("ready", os.getpid())))
    await frames.closed     # the worker's EOF (or death): finish what runs, reply, exit
    if host.running:
        await asyncio.wait(host.running)
    host.close()
    with contextlib.suppress(ConnectionError):
        out.close()


def main(argv: list[str]) -> int:
    fd, parent = int(argv[0]), int(argv[1])
    die_with(parent)
    set_title(f"stagedoor render: render process of worker {parent}")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    uvloop.run(serve(sock))   # the worker's loop: less CPU per render than asyncio's own
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
