"""The built-in handlers: render_tickets and refund, over the order store.

Both read the order's current state on every run, since jobs for one order finish
in any order across workers: a placement that finds the order refunded renders
nothing, and a refund cancels tickets that were already rendered.  A render that
races a refund is settled by the store's scripts: whichever lands second sees the
other (see orders.py), and the PDF of a refunded order does not survive.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..render.order import OrderDataError
from ..stream.job import Job
from ..worker.policy import PermanentError
from .context import Context, log_extra
from .orders import OrderStore
from .registry import Registry

registry = Registry()


def pdf_path(ctx: Context, order_id: int) -> Path:
    return Path(ctx.settings.tickets_dir) / f"order-{order_id}.pdf"


def write_atomic(path: Path, data: bytes) -> None:
    """tmp + fsync + rename + fsync(dir): a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unique per call: two deliveries of one job may render at once in one process.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


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
    from .._render import font_stats

    missing = font_stats()["missing_glyphs"]
    if missing:
        ctx.stats.counters["missing_glyphs"]["render_tickets"] = missing


@registry.register("render_tickets")
async def render_tickets(job: Job, ctx: Context) -> None:
    """Render the order's tickets to one PDF, unless it was refunded or already done."""
    if await ctx.already_done(job):
        return
    store = _store(ctx)
    try:
        stored = await store.get(job.order_id)
    except OrderDataError as e:
        raise PermanentError(f"order {job.order_id}: {e}") from None
    if stored is None:
        raise PermanentError(f"order {job.order_id} not found")
    if stored.status == "refunded":
        ctx.log.info("order %d is refunded: nothing to render", job.order_id,
                     extra=log_extra(job))
        await ctx.mark_done(job)
        return
    render = _render_fn(ctx)
    pdf = await ctx.to_thread(render, stored.order)
    _count_missing_glyphs(ctx)
    path = pdf_path(ctx, job.order_id)
    await ctx.to_thread(write_atomic, path, pdf)
    if not await store.mark_rendered(job.order_id, str(path)):
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
        stored = await store.get(job.order_id)
        await ctx.to_thread(Path(rendered).unlink, True)
        await store.add_cancelled(job.order_id, len(stored.order.tickets) if stored else 0)
        ctx.log.info("order %d refunded: tickets cancelled", job.order_id,
                     extra=log_extra(job))
    await ctx.mark_done(job)
