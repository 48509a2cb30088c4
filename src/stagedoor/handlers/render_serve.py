"""The render process: renders orders and writes their PDFs for one worker, so that a
crash inside the renderer (a C library's failed assertion: SIGABRT) ends this process
and not the worker (render_host.py is the worker's side and says what it does then).

    python -m stagedoor.handlers.render_serve FD PARENT_PID

Started by the worker (exec'd, not forked: no Redis connection, thread, event loop or
open font of the worker is shared), with one end of a socketpair as FD.  On it, frames
of a 4-byte little-endian length and a pickle, both ways (the two ends are one user's
processes, parent and child: pickle is no trust boundary here):

    worker -> here   (render_threads, the worker's font plan)      first, once
    here -> worker   ("ready", pid)                               after a warm-up render
    worker -> here   (rid, directory, name, order JSON)           a render and its write
    here -> worker   (rid, outcome, detail, missing_glyphs, scripts printed as marks)

outcome is "ok" (the PDF's bytes and directory entry are durable, the same C write as
in the worker: render_pool.LocalRender), "failed" (RenderFailed: detail is the reason),
"oserror" (detail: errno, strerror, filename) or "memory".  Several renders are in
flight at once on the native pool's threads.

It ends when the worker closes its end (EOF): it finishes the renders it has, replies,
and exits 0.  SIGTERM and SIGINT are ignored (a terminal's ^C or a signal to the
process group is the worker's to act on; it closes the socket), and the kernel kills it
(PR_SET_PDEATHSIG) if the worker dies, even with renders still running.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import uvloop

HEADER = struct.Struct("<I")
_PR_SET_PDEATHSIG = 1


def frame(obj: Any) -> bytes:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next frame's object; asyncio.IncompleteReadError at EOF."""
    (n,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    return pickle.loads(await reader.readexactly(n))


class Outbox:
    """Frames written once per loop iteration: the renders sent (or finished) together
    go out in one write, and wake the other side once."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._frames: list[bytes] = []

    def put(self, data: bytes) -> None:
        if not self._frames:
            asyncio.get_running_loop().call_soon(self._flush)
        self._frames.append(data)

    def _flush(self) -> None:
        frames, self._frames = self._frames, []
        if not self.writer.is_closing():
            self.writer.write(b"".join(frames))

    def close(self) -> None:
        self._flush()
        self.writer.close()


def die_with(parent: int) -> None:
    """SIGKILL from the kernel when the worker dies (it forked us from its main thread,
    which lives as long as it does); if it is already gone, exit now."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


class Serve:
    def __init__(self, threads: int, plan: Any) -> None:
        from ..demo.orders import demo_order
        from ..render import fonts, renderer
        from .render_pool import LocalRender

        fonts.use(plan)     # the worker's (its settings, its fonts found at its start)
        renderer()(demo_order(1))   # a renderer that cannot render at all fails here, at start
        self._threads = ThreadPoolExecutor(threads, thread_name_prefix="render")
        self.local = LocalRender(threads, self._in_thread)

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)

    async def render(self, out: Outbox, rid: int, directory: bytes,
                     name: bytes, data: bytes) -> None:
        from ..render.order import Order, RenderFailed
        from .render_pool import missing_glyphs

        outcome: str = "ok"
        detail: Any = None
        lost: dict[str, int] = {}
        try:
            order = Order.from_json(data)
            lost = await self.local.render_to(order, Path(os.fsdecode(directory),
                                                           os.fsdecode(name)))
        except RenderFailed as e:
            outcome, detail = "failed", str(e)
        except MemoryError:
            outcome = "memory"
        except OSError as e:
            outcome, detail = "oserror", (e.errno, e.strerror, e.filename)
        except Exception as e:  # the order did not parse here: the worker parsed it
            outcome, detail = "failed", str(RenderFailed.of(e))
        out.put(frame((rid, outcome, detail, missing_glyphs(), lost)))

    def close(self) -> None:
        self.local.close()
        self._threads.shutdown(wait=True)


async def serve(sock: socket.socket) -> None:
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        threads, plan = await read_frame(reader)
    except (asyncio.IncompleteReadError, ConnectionError):
        return      # the worker stopped before it rendered anything
    host = Serve(threads, plan)
    writer.write(frame(("ready", os.getpid())))
    out = Outbox(writer)
    running: set[asyncio.Task[None]] = set()
    while True:
        try:
            rid, directory, name, data = await read_frame(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            break       # the worker closed its end (or died): finish what runs, then exit
        task = asyncio.create_task(host.render(out, rid, directory, name, data))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.wait(running)
    host.close()
    with contextlib.suppress(ConnectionError):
        out.close()


def main(argv: list[str]) -> int:
    fd, parent = int(argv[0]), int(argv[1])
    die_with(parent)
    from ..proctitle import set_title

    set_title(f"stagedoor render: render process of worker {parent}")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    uvloop.run(serve(sock))   # the worker's loop: less CPU per render than asyncio's own
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
