"""render_tickets' render and durable write on the native render pool: C threads that
never take the GIL (stagedoor._render.RenderPool), writing through
tickets/_durable.pyx's FileSink, and reporting to the event loop through an eventfd.

    pool = NativeRenderPool.start(threads)     # None where the extensions are not built
    written = await pool.render_to(order, path, sync)

Why: with the worker's Python thread pool, a job crossed the event loop, a render
thread and the GIL about six times; each crossing is a futex wake and a context switch
on this VM, often a wait behind another thread for the GIL, and together they were
most of a job's latency with the seed's 8 in flight (docs/benchmarks.md, "The render
pool").  Here the event loop reads the order into C itself (under the GIL, what a
render thread did anyway), one pool thread renders and writes without the GIL, and
one eventfd wake-up brings every finished order back.

Same guarantee as files.write_atomic (the same C write): `render_to` resolves True
once the PDF's bytes and its directory entry are durable, False (nothing written) where
the file system cannot do the unnamed file (the caller then takes the os.* path), and
raises what the write raised, or RenderFailed for what the render raised (MemoryError
as it is).  Made in the worker process, after fork;
closed by Context.aclose.

A render whose future was cancelled (its job's time limit) is not stopped: the pool
thread renders and writes the PDF all the same.  `render_into(..., landed)` calls
`landed()` from the loop's reader when such a render did write its PDF, so the caller
can check what it wrote (LocalRender: the landed-late check, as the render process
does for its renders).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from ..render import fonts, native_available, renderer, tables
from ..render.order import Order, OrderDataError, RenderFailed
from ..telemetry.logs import JOB_FIELDS, current_job
from .durable import DirectorySync, GroupSyncs
from .files import no_unnamed_files, unnamed_files, write_atomic


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
        if not native_available():
            return None
        try:  # optional: the native extensions, absent where the reference renders
            from .._render import RenderPool
            from ._durable import FileSink
        except ImportError:
            return None
        return cls(RenderPool(threads), FileSink, asyncio.get_running_loop())

    def render_to(self, order: Order, path: Path, sync: DirectorySync | None
                  ) -> asyncio.Future[bool]:
        """Render `order` and write it durably as `path`; see the module docstring.
        `sync` must be a native DirSync or None (a plain directory fsync)."""
        return self.render_into(order, os.fsencode(path.parent), os.fsencode(path.name),
                                sync)

    def render_into(self, order: Order, directory: bytes, name: bytes,
                    sync: DirectorySync | None,
                    landed: Callable[[], None] | None = None) -> asyncio.Future[bool]:
        """render_to, the path as bytes (the render process's frames carry them).
        `landed()`: called if the future is cancelled and the render writes its PDF
        after all (see the module docstring)."""
        sink = self._sink(directory, name, sync)
        fut: asyncio.Future[bool] = self._loop.create_future()
        try:
            self._pool.submit(order, sink, (fut, sink, landed))     # reads the order: may raise
        except (MemoryError, RuntimeError):     # no memory, or the pool is closed
            raise
        except Exception as e:
            raise RenderFailed.of(e) from e
        return fut

    def submit_call(self, order: Order, directory: bytes, name: bytes,
                    sync: DirectorySync | None, done: Written) -> None:
        """render_into without a future: `done(written, error)` is called from the
        loop's reader when the render and write are over (the render process's fast
        path: no task, no future, no call_soon per order)."""
        sink = self._sink(directory, name, sync)
        try:
            self._pool.submit(order, sink, (done, sink, None))  # reads the order: may raise
        except (MemoryError, RuntimeError):
            raise
        except Exception as e:
            raise RenderFailed.of(e) from e

    def _ready(self, done: list[Any] | None = None) -> None:
        for (fut, sink, landed), err in (self._pool.collect() if done is None else done):
            if not isinstance(fut, asyncio.Future):     # submit_call's callback
                _call(fut, sink, err)
                continue
            if fut.done():  # the job was cancelled meanwhile: the file may exist, unacked
                if landed is not None and err is None and _wrote(sink):
                    _call_landed(landed)
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


# submit_call's callback: (written, error); written False with no error: nothing was
# written, the file system cannot do the unnamed file (the caller takes the os.* path)
Written = Callable[[bool, BaseException | None], None]


def _wrote(sink: Any) -> bool:
    """Did this finished render write its PDF (no error, and not refused as an unnamed
    file)?  For a render nobody waits for: its write's error is nobody's either."""
    try:
        return sink.result() is None
    except OSError:
        return False


def _call_landed(landed: Callable[[], None]) -> None:
    try:
        landed()
    except Exception:   # a bug of the callback: the other orders of the batch go on
        logging.getLogger("stagedoor.render").exception("landed-late callback failed")


def job_log_context(job: Mapping[str, Any] | None) -> contextvars.Context:
    """A fresh context, with these job fields for its log lines (telemetry/logs.py): for
    a task that runs on behalf of a job whose own task is gone."""
    context = contextvars.Context()
    if job is not None:
        context.run(JOB_FIELDS.set, job)
    return context


class LateChecks:
    """Tasks run on behalf of jobs whose own task is gone (the landed-late check of a
    render that wrote its PDF after its job ended, and the writes such a check waits
    on): held here so that they run to their end, and waited for at the worker's stop
    (LocalRender.aclose, RenderHost.close).  `landed_late(order_id, path)` is the check
    (None: there is none, as in the render process: the worker checks its renders)."""

    def __init__(self, landed_late: LandedLate | None = None) -> None:
        self.landed_late = landed_late
        self._running: set[asyncio.Future[Any]] = set()

    def check(self, order_id: int, path: Path, job: Mapping[str, Any] | None = None) -> None:
        """landed_late(order_id, path) in a task, in `job`'s log context (the current
        job's by default), for a PDF written that no job will mark.  Nothing without
        landed_late."""
        if self.landed_late is not None:
            self.run(self.landed_late(order_id, path), current_job() if job is None else job)

    def run(self, check: Coroutine[Any, Any, None],
            job: Mapping[str, Any] | None) -> None:
        """`check` in a task of its own, its log lines carrying `job`'s fields.  What it
        raises is logged there (no caller awaits it: asyncio said it only when the task
        was collected, and wait() dropped it at the stop)."""
        self.keep(asyncio.get_running_loop().create_task(_logged(check),
                                                         context=job_log_context(job)))

    def keep(self, fut: asyncio.Future[Any]) -> None:
        self._running.add(fut)
        fut.add_done_callback(self._running.discard)

    async def wait(self) -> None:
        """Until every one has ended, those started meanwhile included."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)


async def _logged(check: Coroutine[Any, Any, None]) -> None:
    try:
        await check
    except Exception:
        # the PDF it was to check stays until the job's next run or a refund removes it
        logging.getLogger("stagedoor.render").exception(
            "the check of a PDF written after its job ended failed")


def _call(done: Written, sink: Any, err: Any) -> None:
    if err is not None:     # the render's error (the write's is the sink's)
        result: tuple[bool, BaseException | None] = (
            False, err if isinstance(err, MemoryError) else RenderFailed.of(err))
    else:
        try:
            result = (sink.result() is None, None)
        except OSError as e:
            result = (False, e)
    try:
        done(*result)
    except Exception:   # a bug of the callback: the other orders of the batch go on
        logging.getLogger("stagedoor.render").exception("render callback failed")


_count_missing: Callable[[], int] | None = None


def missing_glyphs() -> int:
    """The native renderer's count of replacement marks drawn in this process so far
    (every thread); -1 without it.  Three calls a render: looked up once."""
    global _count_missing
    if _count_missing is None:
        if native_available():
            # optional: the extension, absent where the reference renders
            from .._render import missing_glyphs as count
        else:
            def count() -> int:
                return -1
        _count_missing = count
    return int(_count_missing())


def check_order_id(order_id: int, order: Order) -> Order:
    """The order, refused when its data is another order's: a hash under order:115 whose
    data says order 999 would print ORDER 999 on order-115.pdf."""
    if order.order_id != order_id:
        raise OrderDataError(f"stored under order {order_id} but its data is for order "
                             f"{order.order_id}")
    return order


def stored_order(order_id: int, data: bytes) -> Order:
    """The order stored under `order_id` from its JSON (OrderDataError if it is none)."""
    return check_order_id(order_id, Order.from_json(data))


def uncovered_scripts(order: Order) -> dict[str, int]:
    """The scripts of the order's text that no configured face has, with their counts."""
    names = [name for name, _ in tables.FIELDS] + ["small_print"]
    return fonts.uncovered(fonts.current(), "".join(
        str(getattr(t, name)) for t in order.tickets for name in names))


def rendered(render: Any, order: Order) -> bytes:
    """The PDF, or RenderFailed for what the renderer raised (the job's error, not the
    worker's); out of memory stays what it is, the worker's state, worth a retry."""
    try:
        pdf: bytes = render(order)
    except MemoryError:
        raise
    except Exception as e:
        raise RenderFailed.of(e) from e
    return pdf


def render_write(render: Any, order: Order, path: Path, syncs: GroupSyncs) -> None:
    write_atomic(path, rendered(render, order), syncs=syncs)


class LocalRender:
    """render_tickets' render and durable write in this process: on the native pool, or
    where it is not built (or the file system cannot do unnamed files) on threads with
    files.write_atomic.  The worker uses it with render_isolation = "none"; the render
    process (render_host.py) uses it for the worker otherwise.

        local = LocalRender(threads, run_in_thread)
        lost = await local.render_to(order, path)

    `render_to` returns once the PDF's bytes and its directory entry are durable, and
    raises RenderFailed (the order's error), the write's OSError, or MemoryError.  It
    returns the scripts of the order that printed as replacement marks (no configured
    face has them: {"Vith": 2}), looked for only when the renderer's count of such
    marks moved during this render (the check opens every face); a concurrent order's
    marks move it too, and then this order is found clean.

    A render whose caller was cancelled (its job's time limit) goes on, on the pool or
    its thread, and may write the PDF after the job ended: a refund that ran meanwhile
    found nothing to cancel.  With `landed_late(order_id, path)` (the worker's, for
    render_isolation = "none": tickets/handlers.py), that is called, in a task in the
    job's log context, once such a render wrote its PDF (or at once, when the write was
    over before the cancelled caller could resume); aclose() waits for those checks
    and for the writes they wait on.  The render process passes none: the worker
    checks its renders (render_host.py)."""

    def __init__(self, threads: int,
                 run_in_thread: Callable[..., Awaitable[Any]],
                 landed_late: LandedLate | None = None) -> None:
        self._pool = NativeRenderPool.start(threads) if unnamed_files() else None
        self._syncs = GroupSyncs()
        self._by_bytes: dict[bytes, DirectorySync] = {}   # the same, by the directory's bytes
        self._run_in_thread = run_in_thread
        self._late = LateChecks(landed_late)   # the checks, and the writes they wait on

    @property
    def pool(self) -> NativeRenderPool | None:
        return self._pool

    @property
    def missing_glyphs(self) -> int:
        return missing_glyphs()

    async def render_to(self, order: Order, path: Path) -> dict[str, int]:
        return await self.render_into(order, os.fsencode(path.parent),
                                      os.fsencode(path.name), path)

    def submit(self, order: Order, directory: bytes, name: bytes, done: Written) -> bool:
        """The native pool's fast path (NativeRenderPool.submit_call), False where it
        does not apply (no pool, no unnamed files): then render_into.
        Raises what the pool's submit raises (RenderFailed, MemoryError)."""
        pool = self._pool
        if pool is None or not unnamed_files():
            return False
        pool.submit_call(order, directory, name, self._sync_of(directory), done)
        return True

    def _sync_of(self, directory: bytes) -> DirectorySync:
        sync = self._by_bytes.get(directory)
        if sync is None:    # a native DirSync: the pool needs _durable
            sync = self._by_bytes[directory] = self._syncs.get(Path(os.fsdecode(directory)))
        return sync

    async def render_into(self, order: Order, directory: bytes, name: bytes,
                          path: Path | None = None) -> dict[str, int]:
        """render_to, the path as bytes: no Path made unless the os.* path writes."""
        before = missing_glyphs()
        pool = self._pool if unnamed_files() else None     # the file system said no since
        landed = self._landed(order.order_id, directory, name)
        written = False
        if pool is not None:
            fut = pool.render_into(order, directory, name, self._sync_of(directory), landed)
            try:
                written = await fut
            except asyncio.CancelledError:
                # settled before the cancellation reached us: the pool's reader saw a
                # future still pending, so the check is ours (else it is the reader's)
                if (landed is not None and fut.done() and not fut.cancelled()
                        and fut.exception() is None and fut.result()):
                    landed()
                raise
            if not written:
                no_unnamed_files()  # nothing written: from now on the os.* path
        if not written:
            if path is None:
                path = Path(os.fsdecode(directory), os.fsdecode(name))
            await self._write_in_thread(order, path, landed)
        if before < 0 or missing_glyphs() == before:
            return {}
        lost: dict[str, int] = await self._run_in_thread(uncovered_scripts, order)
        return lost

    def check_late(self, order_id: int, path: Path,
                   job: Mapping[str, Any] | None = None) -> None:
        """landed_late(order_id, path) in a task, in `job`'s log context (the current
        job's by default), for a PDF written that no job will mark; aclose() waits for
        it.  Nothing without landed_late."""
        self._late.check(order_id, path, job)

    def _landed(self, order_id: int, directory: bytes, name: bytes
                ) -> Callable[[], None] | None:
        """What runs check_late for this render if it writes after its caller was
        cancelled, in the caller's job's log context (taken now: the caller's task is
        gone then)."""
        if self._late.landed_late is None:
            return None
        job = current_job()

        def landed() -> None:
            self.check_late(order_id, Path(os.fsdecode(directory), os.fsdecode(name)), job)

        return landed

    async def _write_in_thread(self, order: Order, path: Path,
                               landed: Callable[[], None] | None) -> None:
        """The os.* path's render and write on a thread; one whose caller is cancelled
        runs on (a thread is not stopped), and `landed()` runs if it writes."""
        write = self._run_in_thread(render_write, renderer(), order, path, self._syncs)
        if landed is None:
            await write
            return
        task = asyncio.ensure_future(write)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._late.keep(task)

            def after(done: asyncio.Future[Any]) -> None:
                if not done.cancelled() and done.exception() is None:
                    landed()
            task.add_done_callback(after)
            raise

    def close(self) -> None:
        """Finish the pool's renders (their landed-late checks start, in tasks: aclose
        waits for those)."""
        if self._pool is not None:
            self._pool.close()

    async def aclose(self) -> None:
        """close(), then wait for the writes of cancelled renders still on a thread and
        for the landed-late checks (the worker's stop, after its jobs ended)."""
        self.close()
        await self._late.wait()


# landed_late(order_id, path): a cancelled render's PDF was written (LocalRender)
LandedLate = Callable[[int, Path], Coroutine[Any, Any, None]]
