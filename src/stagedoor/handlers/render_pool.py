"""render_tickets' render and durable write on the native render pool: C threads that
never take the GIL (stagedoor._render.RenderPool), writing through
handlers/_durable.pyx's FileSink, and reporting to the event loop through an eventfd.

    pool = NativeRenderPool.start(threads)     # None where the extensions are not built
    written = await pool.render_to(order, path, sync)

Why: with the worker's Python thread pool, a job crossed the event loop, a render
thread and the GIL about six times; each crossing is a futex wake and a context switch
on this VM, often a wait behind another thread for the GIL, and together they were
most of a job's latency with the seed's 8 in flight (docs/benchmarks.md, "The render
pool").  Here the event loop reads the order into C itself (~20 us under the GIL, what
a render thread did anyway), one pool thread renders and writes without the GIL, and
one eventfd wake-up brings every finished order back.

Same guarantee as files.write_atomic (the same C write): `render_to` resolves True
once the PDF's bytes and its directory entry are durable, False (nothing written) where
the file system cannot do the unnamed file (the caller then takes the os.* path), and
raises what the write raised, or RenderFailed for what the render raised (MemoryError
as it is).  Made in the worker process, after fork;
closed by Context.aclose.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from ..render.order import Order, RenderFailed
from .durable import DirectorySync


class NativeRenderPool:
    def __init__(self, pool: Any, sink_type: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._pool = pool
        self._sink = sink_type
        self._loop = loop
        loop.add_reader(pool.fd, self._ready)

    @classmethod
    def start(cls, threads: int) -> NativeRenderPool | None:
        """A pool of `threads` on the running loop, or None where the native renderer or
        the native write is not built (the caller uses the thread pool)."""
        from ..render import native_available

        if not native_available():
            return None
        try:
            from .._render import RenderPool
            from ._durable import FileSink
        except ImportError:
            return None
        return cls(RenderPool(threads), FileSink, asyncio.get_running_loop())

    def render_to(self, order: Order, path: Path, sync: DirectorySync | None
                  ) -> asyncio.Future[bool]:
        """Render `order` and write it durably as `path`; see the module docstring.
        `sync` must be a native DirSync or None (a plain directory fsync)."""
        sink = self._sink(os.fsencode(path.parent), os.fsencode(path.name), sync)
        fut: asyncio.Future[bool] = self._loop.create_future()
        try:
            self._pool.submit(order, sink, (fut, sink))     # reads the order: may raise
        except (MemoryError, RuntimeError):     # no memory, or the pool is closed
            raise
        except Exception as e:
            raise RenderFailed.of(e) from e
        return fut

    def _ready(self, done: list[Any] | None = None) -> None:
        for (fut, sink), err in (self._pool.collect() if done is None else done):
            if fut.done():  # the job was cancelled meanwhile: the file may exist, unacked
                continue
            if err is not None:     # the render's error (the write's is the sink's)
                fut.set_exception(err if isinstance(err, MemoryError)
                                  else RenderFailed.of(err))
                continue
            try:
                result = sink.result()
            except OSError as e:
                fut.set_exception(e)
                continue
            fut.set_result(result is None)

    @property
    def pending(self) -> int:
        return int(self._pool.pending)

    def close(self) -> None:
        """Finish what was submitted (a render and a write: milliseconds), stop the
        threads, and settle the futures of what was still running."""
        with contextlib.suppress(RuntimeError, ValueError):  # the loop is closing too
            self._loop.remove_reader(self._pool.fd)
        self._ready(self._pool.close())
