"""The built-in handlers: render_tickets and refund, over the order store.

Both read the order's current state on every run, since jobs for one order finish
in any order across workers: a placement that finds the order refunded renders
nothing, and a refund cancels tickets that were already rendered.  A render that
races a refund is settled by the store's scripts: whichever lands second sees the
other (see orders.py), and the PDF of a refunded order does not survive.  A PDF
written for a job that ended before FINISH_RENDER answered (its time limit, Redis
away), or by a render that went on after its job was cancelled (in the render process,
or on this worker's render pool or thread with render_isolation = "none"), is checked
once the job ended or the PDF landed (_landed_late), and the job's next run, finding
the order refunded, removes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import PermanentError
from ..handlers.context import Context, log_extra
from ..handlers.registry import Registry
from ..render import fonts
from ..render.order import Order, OrderDataError
from ..stream import cluster
from ..stream.job import Job
from ..stream.scripts import LeanScript
from ..telemetry.records import pairs, text
from .files import (
    OutsideTicketsDir,
    confined,
    directory_missing,
    sweep_stale,
)
from .orders import BEGIN_RENDER, FINISH_RENDER, OrderStore, check_status, check_stored
from .render_host import RenderHost
from .render_pool import LocalRender

registry = Registry()


def pdf_name(order_id: int) -> str:
    return f"order-{order_id}.pdf"


def pdf_path(tickets_dir: str, order_id: int) -> Path:
    """The order's PDF: directly inside the tickets directory by construction (the name
    is made from an int), so nothing here to resolve.

    Not checked with files.confined, which resolves the directory (an lstat per path
    component) on every job: a check that cannot fail for a name we make ourselves, and
    a system call per component, each a drop and retake of the GIL by a render thread
    (the futex calls it cost: docs/benchmarks.md, "Moved from comments").  confined()
    stays where the path is data: the `rendered` field a refund deletes."""
    return Path(tickets_dir) / pdf_name(order_id)


RENDERS_NEXT_PEEK = 10  # entries after the group's last-delivered id looked at by the hook
# s the worker's boot waits for a render process started at boot (wait_for_render_process)
# before it reads: its start takes ~0.1-0.2 s, more on a loaded host; past this the
# worker reads on, and its first renders wait for the process as they would without
RENDER_BOOT_WAIT = 5.0


@registry.on_start
async def start_render_process(ctx: Context) -> None:
    """The render process (render_isolation = "process") started in the background at
    boot when render_tickets jobs are next on the stream, and waited for before the
    first read (wait_for_render_process): the worker takes no job it cannot render
    yet, so the first renders of a backlog do not sit ~0.1-0.4 s on a worker whose
    process is starting while other workers could run them.  Registered before
    sweep_temporaries, so the start overlaps that sweep.  Not for every worker: one
    with no render job in sight (a no-op fleet, a quiet stream) starts it on its
    first render, as before, and pays nothing."""
    if ctx.settings.render_isolation != "process":
        return
    try:
        if not await _renders_next(ctx):
            return
    except Exception:   # a guess at what comes, never a reason the boot fails
        return
    render = _render(ctx)
    if isinstance(render, RenderHost):
        # the plan the process gets in its first frame (warn_at_start then reuses it),
        # made once the exec is issued: ~20 ms of reading the fonts' coverage that the
        # process's imports (~60 ms, on the other core) now hide, not add to the boot
        render.start(lambda: fonts.use_settings(ctx.settings))


async def _renders_next(ctx: Context) -> bool:
    """Is a render_tickets job among the next entries the group will deliver?  Two
    commands (XINFO GROUPS, XRANGE), once at boot; replies read flat or parsed (the
    worker's command client has no reply callbacks)."""
    s = ctx.settings
    last: Any = None
    for g in await ctx.redis.xinfo_groups(s.stream):
        info = pairs(g)
        if text(info.get("name")) == s.group:
            last = info.get("last-delivered-id")
    if last is None:
        return False
    entries = await ctx.redis.xrange(s.stream, min=f"({text(last)}", count=RENDERS_NEXT_PEEK)
    return any(fields and text(pairs(fields).get("kind")) == "render_tickets"
               for _id, fields in entries or ())


@registry.on_start
async def sweep_temporaries(ctx: Context) -> None:
    """Partial PDFs of a worker killed mid-write (or of a full disk before the fix)."""
    await ctx.to_thread(sweep_stale, ctx.settings.tickets_dir)


@registry.on_start
async def wait_for_render_process(ctx: Context) -> None:
    """The boot's last start hook: a render process start_render_process started is
    waited for (at most RENDER_BOOT_WAIT), so the worker becomes ready, and reads,
    once it can render.  A start that fails or takes longer is not the boot's failure:
    the worker reads on, and its renders wait for (or fail with) the process as usual
    (render_host.py)."""
    render = ctx.state.get("render")
    if not isinstance(render, RenderHost) or not render.started_early:
        return
    if not await render.started(RENDER_BOOT_WAIT):
        ctx.log.warning("the render process was not ready within %gs of the boot; "
                        "reading on (renders wait for it)", RENDER_BOOT_WAIT)


def _store(ctx: Context) -> OrderStore:
    store = ctx.state.get("orders")
    if store is None:
        store = ctx.state["orders"] = OrderStore(ctx.redis, ctx.settings)
    assert isinstance(store, OrderStore)
    return store


def _render(ctx: Context) -> RenderHost | LocalRender:
    """Where this worker renders: its render process (render_isolation = "process"), or
    here (LocalRender: the native pool, else threads); made on first use, closed when
    the worker stops (after its jobs ended: the process finishes what it has)."""
    render = ctx.state.get("render")
    if render is None:
        # either way a render whose job was cancelled goes on and may write the PDF:
        # _landed_late checks it when it does (the stop waits for those checks)
        async def landed_late(order_id: int, path: Path) -> None:
            await _landed_late(ctx, order_id, path)

        if ctx.settings.render_isolation == "process":
            render = RenderHost(ctx.settings, ctx.stats, ctx.log, landed_late)
            ctx.on_close(render.close)
        else:
            render = LocalRender(ctx.settings.render_threads, ctx.to_thread, landed_late)
            ctx.on_close(render.aclose)
        ctx.state["render"] = render
    assert isinstance(render, RenderHost | LocalRender)
    return render


async def _landed_late(ctx: Context, order_id: int, path: Path) -> None:
    """A render whose job was cancelled (its time limit) wrote the order's PDF after
    all, in the render process or on this worker's render pool or thread (or wrote
    it, and the job ended before FINISH_RENDER answered: render_tickets).  Nobody
    marked it rendered, so a refund that ran meanwhile found nothing to cancel: if the
    order is refunded (or gone) now, the PDF is removed (issue 37).  If it is still
    placed the PDF is a valid ticket, which the job's next delivery marks; a refund
    after this check removes it itself (refund: the order's PDF goes even when it was
    never marked)."""
    try:
        status = await _store(ctx).status(order_id)
    except Exception as e:  # Redis away: the file stays, a refund removes it (refund)
        ctx.log.error("order %d: a render of a cancelled job wrote its PDF, and the "
                      "order's state could not be read (%s: %s); left in place",
                      order_id, type(e).__name__, e)
        return
    if status == "placed":
        return
    try:
        await ctx.to_thread(path.unlink, True)
    except OSError as e:    # in a task nobody awaits: said here, not lost
        ctx.log.error("order %d is %s: the PDF a render of its cancelled job wrote "
                      "after that could not be removed (%s)", order_id, status or "gone", e)
        return
    ctx.log.info("order %d is %s: the PDF a render of its cancelled job wrote after "
                 "that was removed", order_id, status or "gone")


def _warn_uncovered(ctx: Context, job: Job, lost: dict[str, int]) -> None:
    """An order printed with replacement marks (characters no configured face has): a
    warning naming the order and the scripts, counted as missing_glyph_orders (the
    renderer found them: render_pool.LocalRender.render_to).

    The counter missing_glyphs is set to the renderer's total (it counts across its
    threads, and across this worker's render processes), not incremented."""
    missing = _render(ctx).missing_glyphs
    if missing > 0:
        ctx.stats.counters["missing_glyphs"]["render_tickets"] = missing
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
    tests/stream/test_cluster.py).  The cost is redis-py's client overhead per call; a
    lean connection per node would win it back (not done)."""
    if not cluster.is_cluster_url(ctx.settings.redis_url):
        return await script(ctx.lean(), keys, args)
    name = f"routed-script:{script.sha}"
    routed = ctx.state.get(name)
    if routed is None:
        routed = ctx.state[name] = ctx.redis.register_script(script.source)
    return await routed(keys=keys, args=args)


async def _render_stored(ctx: Context, order_id: int, data: bytes, status: str,
                         rendered: str | None) -> tuple[str, Path, dict[str, int], int]:
    """Unless the order is refunded, render it and write the PDF durably where this
    worker renders (_render); (its status, the PDF's path, the scripts printed as
    replacement marks, its ticket count).  OrderDataError when the stored order is
    none (its JSON, its id, its status).

    The order's JSON is parsed once a job (issue 36): by the render process where there
    is one (the worker sends it the bytes as stored), else here, on the loop, and here
    too for a refunded order (nothing to render: its data is still checked)."""
    path = pdf_path(ctx.settings.tickets_dir, order_id)
    render = _render(ctx)
    order: Order | None = None
    if check_status(status) != "placed" or not isinstance(render, RenderHost):
        stored = check_stored(order_id, Order.from_json(data), status, rendered)
        if stored.status == "refunded":
            return stored.status, path, {}, len(stored.order.tickets)
        order = stored.order
    made = ctx.state.setdefault("dirs_made", set())
    if path.parent not in made:  # once a process: a render sent into a missing directory
        await ctx.to_thread(path.parent.mkdir, parents=True, exist_ok=True)  # is lost
        made.add(path.parent)
    for attempt in (1, 2):
        try:
            if order is None:
                assert isinstance(render, RenderHost)
                lost, tickets = await render.render(order_id, data, path)
            else:
                assert isinstance(render, LocalRender)
                lost, tickets = await render.render_to(order, path), len(order.tickets)
            return status, path, lost, tickets
        except FileNotFoundError as e:  # the directory was removed meanwhile
            if attempt == 2 or not directory_missing(e, path.parent):
                raise
            await ctx.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    raise AssertionError("unreachable")


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
    reply = await _order_script(ctx, begin, [done_key, lease_key, order_key,
                                             ctx.old_done_key(job)],
                                [ctx.lease_holder(), int(ctx.settings.job_timeout * 1000),
                                 job.outbox_id])
    if reply[0] == b"done":
        ctx.skipped_as_done(job)
        return
    if reply[0] == b"held":
        raise ctx.lease_held(job, reply[1])
    data, status, rendered = reply[1], reply[2], reply[3]
    if data is None:
        raise PermanentError(f"order {job.order_id} not found")
    status_s = status.decode() if status else "placed"
    rendered_s = rendered.decode() if rendered else None
    try:
        status_now, path, lost, tickets = await _render_stored(ctx, job.order_id, data,
                                                               status_s, rendered_s)
    except OrderDataError as e:
        raise PermanentError(f"order {job.order_id}: {e}") from None
    if status_now == "refunded":
        # An earlier attempt or delivery of this job may have written the PDF after
        # the refund and ended before FINISH_RENDER could say so (its time limit, Redis
        # away): the refund found nothing, so the PDF goes here (one unlink, and only
        # for a refunded order's job)
        await ctx.to_thread(path.unlink, True)
        ctx.log.info("order %d is refunded: nothing to render", job.order_id,
                     extra=log_extra(job))
        await ctx.mark_done(job)
        return
    _warn_uncovered(ctx, job, lost)
    try:
        marked = await _order_script(ctx, finish, [order_key, done_key, lease_key],
                                     [str(path), job.kind, ctx.mark_ttl(), job.outbox_id])
    except BaseException:
        # The PDF is written, and FINISH_RENDER's answer (the refund that ran meanwhile)
        # is lost with this attempt: checked after it, as a render that landed late (in
        # a task, in this job's log context; the worker's stop waits for it; if Redis
        # does not answer it either, the job's next run removes a refunded order's PDF)
        _render(ctx).check_late(job.order_id, path)
        raise
    if not marked:
        # A refund landed while we rendered: it could not see our file, so the
        # cancellation is ours to do.
        await ctx.to_thread(path.unlink, True)
        await store.add_cancelled(job.order_id, tickets)
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
    else:
        # never marked rendered, but a render whose job was cancelled may have written
        # it (the render process finishes what it was sent): after the status above,
        # so a later one finds the order refunded (_landed_late)
        await ctx.to_thread(pdf_path(ctx.settings.tickets_dir, job.order_id).unlink, True)
    await ctx.mark_done(job)
