"""The worker's lifecycle around the loop: boot, then drain and stop.

boot   HELLO on the hot-path connection (server version floor; a cluster node needs a
       redis+cluster:// URL), ensure the group, open the hot-path connections;
       Redis away: retry with backoff until boot_timeout (BootError -> exit 69); bad
       credentials or a refused ACL: ConfigError at once (exit 78).
stop   a stop requested at any moment of the boot ends it (unless_stopped): the worker
       never becomes READY and reads nothing; a cancel is never turned into a retry.
drain  stop reading without abandoning a read Redis may already have served, let the
       in-flight jobs finish within graceful_timeout (the rest stay pending), flush
       the acks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis

from ..backoff import Backoff, reconnect
from ..config import ConfigError, Settings
from ..errors import StagedoorError
from ..handlers import Context, Registry
from ..stream import backlog, connection
from ..stream.errors import describe_unreachable, is_oom
from ..stream.queue import ensure_group
from .acks import Acker
from .outage import Outage
from .reader import Reader
from .slots import Slots

log = logging.getLogger("stagedoor.worker")

_UNBLOCK_FAILED: tuple[type[BaseException], ...] = (
    TimeoutError, redis.ResponseError, *connection.TRANSIENT_ERRORS)


class BootError(StagedoorError, RuntimeError):
    """The worker could not reach a usable Redis within boot_timeout."""


async def boot(settings: Settings, cmd: aioredis.Redis, reader: Reader, acker: Acker,
               outage: Outage) -> None:
    """Until Redis answers and the group exists; then open the hot-path connections.

    Redis out of memory answers XGROUP CREATE with OOM (also for a group that exists):
    an outage to wait out, not a boot failure.  The worker stays un-READY, says so in
    its heartbeats (gauge redis_oom, which the supervisor reports to systemd), and
    boots once a write goes through; boot_timeout counts from then."""
    s = settings
    deadline = time.monotonic() + s.boot_timeout
    backoff = Backoff(reconnect(0.05, 1.0))
    while True:
        try:
            # HELLO, not INFO: INFO is @dangerous and cannot be granted for one
            # section, and the least-privilege ACL should not need it.  Asked on the
            # ack connection: the server (cluster node) that holds the stream.
            # Open the hot-path connections now: READY means all of them work, and
            # the first burst of jobs does not pay for connects and TLS handshakes.
            await acker.connect()
            hello = await acker.conn.call("HELLO", "2")
            connection.check_server(dict(zip(hello[::2], hello[1::2], strict=False)), s)
            await ensure_group(cmd, s)
            await reader.conn.connect()
            with contextlib.suppress(Exception):  # a count, never a reason not to boot
                await backlog.audit(cmd, s)  # before the first read hides a loss
            return
        except (redis.AuthenticationError, redis.exceptions.AuthorizationError) as e:
            # redis-py files these under ConnectionError; no retry makes them right.
            raise ConfigError(f"Redis refused the credentials: {e}") from None
        except connection.TRANSIENT_ERRORS as e:
            if time.monotonic() > deadline:
                raise BootError(f"Redis unreachable for {s.boot_timeout:g}s: "
                                f"{describe_unreachable(s.redis_url, e)}") from e
            delay = backoff.next()
            log.warning("Redis not reachable (%s); retrying in %.2fs", e, delay)
            await asyncio.sleep(delay)
        except redis.ResponseError as e:
            # The same refusal as an error reply to the hot-path connection's AUTH.
            if str(e).startswith(("WRONGPASS", "NOAUTH", "ERR invalid password")):
                raise ConfigError(f"Redis refused the credentials: {e}") from None
            if not is_oom(e):
                raise
            outage.enter(e)
            await outage.wait_clear()
            deadline = time.monotonic() + s.boot_timeout


async def unless_stopped(work: Awaitable[object], stopping: asyncio.Event, what: str
                         ) -> bool:
    """Run `work` (the boot, a wait before the first read) until it ends or a stop is
    requested; True if it ended, False if the stop came first (then it is cancelled).

    A stop is a flag, not only a cancel: a cancel can be lost on its way (Python 3.11's
    asyncio.wait_for, used by redis-py and our connect, swallows one that lands as the
    awaited call completes: CPython gh-86296), and a lost cancel at boot let a worker
    told to stop become READY and read on.  The flag is checked here, whatever became
    of the cancel, and the cancel is repeated until `work` has ended."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait([task, stop], return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # we were cancelled ourselves: take `work` along
        task.cancel()
        raise
    finally:
        stop.cancel()
    if not stopping.is_set():
        task.result()  # the work ended first: its outcome (raises its error)
        return True
    await cancel_and_wait([task])
    if not task.cancelled() and task.exception() is not None:
        log.debug("%s ended with %r after the stop", what, task.exception())
    log.info("stop requested while %s: stopping", what)
    return False


async def cancel_and_wait(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Cancel the tasks and wait until every one has ended, cancelling again any that
    swallowed its cancel: Python 3.11's asyncio.wait_for (inside redis-py) loses a
    cancel that lands as the awaited call completes (CPython gh-86296), and a loop task
    that lost it (the presence beat, a stopped worker's at the moment it boots) would
    otherwise keep the process alive after its stop.  A task still asked to stop has
    cancelling() > 0."""
    for t in tasks:
        t.cancel()
    pending = {t for t in tasks if not t.done()}
    while pending:
        _, pending = await asyncio.wait(pending, timeout=0.5)
        for t in pending:
            if t.cancelling():
                t.cancel()
    for t in tasks:  # retrieve outcomes: no "exception was never retrieved"
        if not t.cancelled():
            t.exception()


async def on_start(registry: Registry, ctx: Context) -> None:
    """The registry's start hooks (the built-ins sweep stale temporaries); one failing
    is logged, not fatal: the jobs can still run."""
    for fn in registry.starts:
        try:
            await fn(ctx)
        except Exception:
            log.exception("start hook %s failed", getattr(fn, "__qualname__", fn))


def check_renderer(settings: Settings, registry: Registry) -> str | None:
    """Which renderer render_tickets will run ("native" or "reference"; None without it).

    A worker whose native renderer cannot load would report ready and fail every ticket
    job (the reference's extra is not installed by default) or crawl at 1/100 of the
    speed: it refuses to start (ConfigError, exit 78; restarting cannot help) unless the
    operator allowed the fallback with render_fallback = "reference"."""
    if "render_tickets" not in registry.kinds:
        return None
    # here: only a worker with render_tickets loads the renderer (docs/benchmarks.md)
    from ..render import native_import_error

    why = native_import_error()
    if why is None:
        return "native"
    if settings.render_fallback != "reference":
        raise ConfigError(f"{why.split('; using the')[0]}: render_tickets cannot run; "
                          "`stagedoor doctor` says what this host lacks: install the "
                          "manylinux wheel or rebuild it (pip install .), or allow the "
                          "~100x slower pure-Python renderer with --render-fallback reference "
                          "(STAGEDOOR_RENDER_FALLBACK=reference; needs stagedoor[reference])")
    try:  # the reference's shaped-text path: without its extra every ticket job fails
        import bidi.algorithm  # noqa: F401  # optional: the reference extra, checked here
        import fontTools.unicodedata  # noqa: F401  # optional: the reference extra
    except ImportError as e:
        raise ConfigError(f"{why.split('; using the')[0]}, and render_fallback = reference "
                          f"cannot run either ({e}): pip install 'stagedoor[reference]', or "
                          "make the native renderer load (`stagedoor doctor` says what this "
                          "host lacks; the manylinux wheel, or pip install .)") from None
    return "reference"


def warn_at_start(settings: Settings, registry: Registry, consumer: str) -> None:
    """Say loudly what will make this worker slow or its jobs run twice."""
    if "render_tickets" in registry.kinds:
        # here: only a worker with render_tickets loads the renderer and its fonts
        from ..render import fonts, native_import_error

        why = native_import_error()
        if why:
            log.error("NATIVE RENDERER MISSING (%s): render_tickets falls back to the "
                      "pure-Python reference, ~100x slower; rebuild with `pip install .`",
                      why, extra={"consumer": consumer})
        # the fonts of the settings; none is opened before a ticket needs it (after fork)
        plan = fonts.use_settings(settings)
        missing = fonts.missing_warning(plan)
        if missing:
            log.warning(missing, extra={"consumer": consumer})
        uncovered = fonts.uncovered_warning(plan)
        if uncovered:
            log.warning(uncovered, extra={"consumer": consumer})

    for h in registry:
        if h.timeout and h.timeout * 1000 >= settings.claim_idle_ms:
            log.warning("handler %s has a %gs time limit, not below claim_idle_ms=%d: "
                        "other workers will reclaim its jobs while they run",
                        h.kind, h.timeout, settings.claim_idle_ms)


async def drain(settings: Settings, cmd: aioredis.Redis, reader: Reader, slots: Slots,
                acker: Acker, consume: asyncio.Task[None], reclaim: asyncio.Task[None]
                ) -> None:
    """Stop reading, finish in-flight jobs within graceful_timeout, flush acks."""
    reclaim.cancel()
    await stop_reading(settings, acker, reader, consume)
    await asyncio.gather(consume, reclaim, return_exceptions=True)
    timeout = settings.graceful_timeout
    try:
        async with asyncio.timeout(timeout):
            await slots.wait_idle()
    except TimeoutError:
        log.warning("%d jobs still running after %gs; leaving them pending",
                    len(slots.running), timeout)
        for t in slots.running.values():
            t.cancel()
        await asyncio.gather(*slots.running.values(), return_exceptions=True)
    try:
        async with asyncio.timeout(max(1.0, timeout)):
            await acker.drain()
    except TimeoutError:
        log.error("%d acks could not be sent; those jobs stay pending and will run "
                  "again", len(acker))


async def stop_reading(settings: Settings, acker: Acker, reader: Reader,
                       consume: asyncio.Task[None]) -> None:
    """End the consume loop without abandoning a read Redis may already have served.

    Cancelling a BLOCK read whose reply is on its way would leave those entries
    delivered to us and never started, pending until a worker of this name comes
    back or the claim threshold passes.  CLIENT UNBLOCK makes a read that is still
    waiting return empty at once; a reply already sent arrives and is dispatched.
    """
    if consume.done():
        return
    if reader.reading and reader.conn.client_id is not None:
        try:
            # On the ack connection: the reader's server, also on a cluster.
            await acker.conn.call("CLIENT", "UNBLOCK", reader.conn.client_id)
            async with asyncio.timeout(settings.read_socket_timeout):
                await asyncio.shield(consume)
            return
        except _UNBLOCK_FAILED as e:
            log.warning("could not end the blocking read cleanly (%s); cancelling it", e)
        except Exception:  # the loop failed on its own; run() reports it
            return
    # Repeat the cancel: on Python 3.11 a wait_for inside redis-py can swallow one
    # that lands as its call completes (CPython gh-86296), and the loop reads on.
    while not consume.done():
        consume.cancel()
        await asyncio.wait([consume], timeout=0.5)
