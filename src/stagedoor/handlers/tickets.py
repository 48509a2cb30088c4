"""The built-in handlers: render_tickets and refund, over the order store.

Both read the order's current state on every run, since jobs for one order finish
in any order across workers: a placement that finds the order refunded renders
nothing, and a refund cancels tickets that were already rendered.  A render that
races a refund is settled by the store's scripts: whichever lands second sees the
other (see orders.py), and the PDF of a refunded order does not survive.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import PermanentError
from ..render.order import Order, OrderDataError, RenderFailed
from ..stream import cluster
from ..stream.job import Job
from ..stream.scripts import LeanScript
from .context import Context, log_extra
from .durable import GroupSyncs
from .files import (
    OutsideTicketsDir,
    confined,
    no_unnamed_files,
    sweep_stale,
    unnamed_files,
    write_atomic,
)
from .orders import BEGIN_RENDER, FINISH_RENDER, OrderStore, StoredOrder, check_stored
from .registry import Registry
from .render_pool import NativeRenderPool

registry = Registry()

# A test hook (tests/test_render_abort.py): a render_tickets job whose stored order
# contains this text aborts its worker process where the render starts, as a failed
# assertion inside a C library of the renderer would.  Unset, it costs one test a job.
_ABORT_MARK = os.environ.get("_STAGEDOOR_TEST_RENDER_ABORT", "").encode()


def pdf_name(order_id: int) -> str:
    return f"order-{order_id}.pdf"


def pdf_path(tickets_dir: str, order_id: int) -> Path:
    """The order's PDF: directly inside the tickets directory by construction (the name
    is made from an int), so nothing here to resolve.

    It used to be checked with files.confined, which resolves the directory (an lstat
    per path component) on every job: a check that cannot fail for a name we make
    ourselves, and twelve system calls, each a drop and retake of the GIL by a render
    thread: without it perf stat counted 22 futex calls a job instead of 51 (both with
    the C write of _durable.pyx; docs/profile-worker.md (G)).  confined()
    stays where the path is data: the `rendered` field a refund deletes."""
    return Path(tickets_dir) / pdf_name(order_id)


@registry.on_start
async def sweep_temporaries(ctx: Context) -> None:
    """Partial PDFs of a worker killed mid-write (or of a full disk before the fix)."""
    await ctx.to_thread(sweep_stale, ctx.settings.tickets_dir)


def _store(ctx: Context) -> OrderStore:
    store = ctx.state.get("orders")
    if store is None:
        store = ctx.state["orders"] = OrderStore(ctx.redis, ctx.settings)
    assert isinstance(store, OrderStore)
    return store


def _render_fn(ctx: Context):  # type: ignore[no-untyped-def]
    fn = ctx.state.get("render")
    if fn is None:
        from ..render import renderer

        fn = ctx.state["render"] = renderer()
    return fn


def _count_missing_glyphs(ctx: Context) -> None:
    """The process's count of characters drawn as replacement marks (no configured font
    has them), as the worker counter missing_glyphs: the native renderer counts them
    across its threads, so the counter is set to that total, not incremented."""
    from ..render import native_available

    if not native_available():
        return
    from .._render import missing_glyphs

    missing = missing_glyphs()
    if missing:
        ctx.stats.counters["missing_glyphs"]["render_tickets"] = missing


def _missing_so_far() -> int:
    """The native renderer's count of replacement marks drawn so far; -1 without it."""
    from ..render import native_available

    if not native_available():
        return -1
    from .._render import missing_glyphs

    return int(missing_glyphs())


def _uncovered_scripts(order: Order) -> dict[str, int]:
    from ..render import fonts, tables

    names = [name for name, _ in tables.FIELDS] + ["small_print"]
    return fonts.uncovered(fonts.current(), "".join(
        str(getattr(t, name)) for t in order.tickets for name in names))


async def _warn_uncovered(ctx: Context, job: Job, order: Order, before: int) -> None:
    """An order printed with replacement marks (characters no configured face has): a
    warning naming the order and the scripts, counted as missing_glyph_orders.  Only
    when the process's counter moved during this render (the check opens every face);
    a concurrent order's marks move it too, and then this order is found clean."""
    if before < 0 or _missing_so_far() == before:
        return
    lost = await ctx.to_thread(_uncovered_scripts, order)
    if lost:
        ctx.stats.inc("missing_glyph_orders", job.kind)
        ctx.log.warning("order %d printed with replacement marks: no font has %s",
                        job.order_id, ", ".join(f"{tag} ({n})" for tag, n in sorted(lost.items())),
                        extra=log_extra(job))


def _lean_scripts(ctx: Context) -> tuple[LeanScript, LeanScript]:
    scripts = ctx.state.get("render_scripts")
    if scripts is None:
        scripts = ctx.state["render_scripts"] = (LeanScript(BEGIN_RENDER),
                                                 LeanScript(FINISH_RENDER))
    assert isinstance(scripts, tuple)
    return scripts


async def _order_script(ctx: Context, script: LeanScript, keys: list[str],
                        args: list[Any]) -> Any:
    """Run one of the order's scripts where the order's slot lives.

    Standalone and Sentinel: on the handlers' lean connection.  Cluster: through the
    redis-py cluster client (ctx.redis), which routes by the keys' slot.  The lean
    connection talks to one node and an order's keys carry the order's own tag, so
    on a cluster most orders live elsewhere: each call came back MOVED, failed every
    call in flight on that connection with it, and the jobs were retried (measured in
    tests/test_cluster.py).  The cost is redis-py's ~150 us of client overhead per
    call; a lean connection per node would win it back (not done)."""
    if not cluster.is_cluster_url(ctx.settings.redis_url):
        return await script(ctx.lean(), keys, args)
    name = f"routed-script:{script.sha}"
    routed = ctx.state.get(name)
    if routed is None:
        routed = ctx.state[name] = ctx.redis.register_script(script.source)
    return await routed(keys=keys, args=args)


def _syncs(ctx: Context) -> GroupSyncs:
    syncs = ctx.state.get("group_syncs")
    if syncs is None:
        syncs = ctx.state["group_syncs"] = GroupSyncs()
    assert isinstance(syncs, GroupSyncs)
    return syncs


def _check_render_write(render: Any, tickets_dir: str, order_id: int, data: bytes,
                        status: str, rendered: str | None, syncs: GroupSyncs
                        ) -> tuple[StoredOrder, Path]:
    """One thread hop: parse and check the stored order (OrderDataError), then, unless
    it is refunded, render it and write the PDF durably."""
    path = pdf_path(tickets_dir, order_id)
    stored = check_stored(order_id, Order.from_json(data), status, rendered)
    if stored.status != "refunded":
        write_atomic(path, _rendered(render, stored.order), syncs=syncs)
    return stored, path


def _rendered(render: Any, order: Order) -> bytes:
    """The PDF, or RenderFailed for what the renderer raised (the job's error, not the
    worker's); out of memory stays what it is, the worker's state, worth a retry."""
    try:
        pdf: bytes = render(order)
    except MemoryError:
        raise
    except Exception as e:
        raise RenderFailed.of(e) from e
    return pdf


def _native_pool(ctx: Context) -> NativeRenderPool | None:
    """The worker's native render pool (render_threads C threads), made on first use in
    this process; None where the extensions are not built or the tickets directory's
    file system cannot do unnamed files (the thread pool path then)."""
    if "render_pool" not in ctx.state:
        pool = NativeRenderPool.start(ctx.settings.render_threads) if unnamed_files() else None
        ctx.state["render_pool"] = pool
        if pool is not None:
            ctx.on_close(pool.close)
    pool = ctx.state["render_pool"]
    if pool is not None and not unnamed_files():  # the file system said no since
        return None
    assert pool is None or isinstance(pool, NativeRenderPool)
    return pool


async def _render_on_pool(ctx: Context, pool: NativeRenderPool, order_id: int, data: bytes,
                          status: str, rendered: str | None) -> tuple[StoredOrder, Path]:
    """_check_render_write with the render and the write on the native pool: the order
    is parsed and checked here, on the loop (~20 us), then one pool thread renders and
    writes it without the GIL (render_pool.py says why)."""
    path = pdf_path(ctx.settings.tickets_dir, order_id)
    stored = check_stored(order_id, Order.from_json(data), status, rendered)
    if stored.status == "refunded":
        return stored, path
    sync = _syncs(ctx).get(path.parent)  # a native DirSync: the pool needs _durable
    made = ctx.state.get("dirs_made")
    if made is None:
        made = ctx.state["dirs_made"] = set()
    if path.parent not in made:  # once a process: a render sent into a missing directory
        await ctx.to_thread(path.parent.mkdir, parents=True, exist_ok=True)  # is lost
        made.add(path.parent)
    for attempt in (1, 2):
        try:
            if await pool.render_to(stored.order, path, sync):
                return stored, path
            no_unnamed_files()  # nothing written: from now on the os.* path
            break
        except FileNotFoundError as e:
            if attempt == 2 or e.filename != os.fsdecode(os.fsencode(path.parent)):
                raise
            await ctx.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    await ctx.to_thread(_render_write, _render_fn(ctx), stored.order, path, _syncs(ctx))
    return stored, path


def _render_write(render: Any, order: Order, path: Path, syncs: GroupSyncs) -> None:
    write_atomic(path, _rendered(render, order), syncs=syncs)


@registry.register("render_tickets")
async def render_tickets(job: Job, ctx: Context) -> None:
    """Render the order's tickets to one PDF, unless it was refunded or already done.

    Two round trips (_order_script): BEGIN_RENDER (done mark, lease, the order)
    and FINISH_RENDER (rendered mark, done mark, lease released); the order's checks,
    the render and the durable write in one hop to the render pool.  The handler
    returns (and the job is acked) only after the PDF and its directory entry are on
    disk (files.write_atomic, durable.py)."""
    begin, finish = _lean_scripts(ctx)
    store = _store(ctx)
    done_key, lease_key, order_key = (ctx.done_key(job), ctx.lease_key(job),
                                      store.key(job.order_id))
    reply = await _order_script(ctx, begin, [done_key, lease_key, order_key],
                                [ctx.lease_holder(), int(ctx.settings.job_timeout * 1000)])
    if reply[0] == b"done":
        ctx.skipped_as_done(job)
        return
    if reply[0] == b"held":
        raise ctx.lease_held(job, reply[1])
    data, status, rendered = reply[1], reply[2], reply[3]
    if data is None:
        raise PermanentError(f"order {job.order_id} not found")
    if _ABORT_MARK and _ABORT_MARK in data:
        os.abort()
    status_s = status.decode() if status else "placed"
    rendered_s = rendered.decode() if rendered else None
    pool = _native_pool(ctx)
    before = _missing_so_far()
    try:
        if pool is not None:
            stored, path = await _render_on_pool(ctx, pool, job.order_id, data, status_s,
                                                 rendered_s)
        else:
            stored, path = await ctx.to_thread(
                _check_render_write, _render_fn(ctx), ctx.settings.tickets_dir,
                job.order_id, data, status_s, rendered_s, _syncs(ctx))
    except OrderDataError as e:
        raise PermanentError(f"order {job.order_id}: {e}") from None
    if stored.status == "refunded":
        ctx.log.info("order %d is refunded: nothing to render", job.order_id,
                     extra=log_extra(job))
        await ctx.mark_done(job)
        return
    _count_missing_glyphs(ctx)
    await _warn_uncovered(ctx, job, stored.order, before)
    if not await _order_script(ctx, finish, [order_key, done_key, lease_key],
                               [str(path), job.kind, ctx.settings.idempotency_ttl]):
        # A refund landed while we rendered: it could not see our file, so the
        # cancellation is ours to do.
        await ctx.to_thread(path.unlink, True)
        await store.add_cancelled(job.order_id, len(stored.order.tickets))
        ctx.log.info("order %d refunded during render: PDF removed", job.order_id,
                     extra=log_extra(job))
        await ctx.mark_done(job)


@registry.register("refund")
async def refund(job: Job, ctx: Context) -> None:
    """Mark the order refunded and cancel (remove) its rendered tickets."""
    if await ctx.already_done(job):
        return
    store = _store(ctx)
    found, rendered = await store.refund(job.order_id)
    if not found:
        raise PermanentError(f"order {job.order_id} not found")
    if rendered:
        try:
            path = confined(ctx.settings.tickets_dir, rendered, pdf_name(job.order_id))
        except OutsideTicketsDir as e:
            # The field is data anyone with write access to the store can set: never
            # delete what it names unless it is this order's PDF in our directory.
            raise PermanentError(f"order {job.order_id} refunded, but its rendered {e}; "
                                 "not deleted") from None
        try:
            stored = await store.get(job.order_id)
        except OrderDataError:
            stored = None  # the refund stands; the count of cancelled tickets is unknown
        await ctx.to_thread(path.unlink, True)
        await store.add_cancelled(job.order_id, len(stored.order.tickets) if stored else 0)
        ctx.log.info("order %d refunded: tickets cancelled", job.order_id,
                     extra=log_extra(job))
    await ctx.mark_done(job)
