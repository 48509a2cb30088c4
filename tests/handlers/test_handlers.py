"""The built-in handlers over the order store, and plugging in handlers by module:attr."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
from pathlib import Path

import pypdf
import pytest
import redis

from stagedoor.config import ConfigError, Settings
from stagedoor.demo.orders import demo_order
from stagedoor.handlers import load_registry
from stagedoor.handlers.loading import MOVED
from stagedoor.render.order import Order
from stagedoor.stream.queue import ensure_group_sync
from stagedoor.tickets.orders import put_orders_sync
from tests.support.worker import add_jobs, dead_entries, eventually, pending_summary, running

FAST = {"block_ms": 100, "reclaim_interval": 0.05, "retry_backoff": 0.001}


def qpdf_check(path: Path) -> None:
    check = subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "No syntax or stream encoding errors" in check.stdout


def pdf_text(path: Path) -> str:
    return "\n".join(page.extract_text() for page in pypdf.PdfReader(path).pages)


async def test_render_tickets_writes_a_valid_pdf_atomically(
        settings: Settings, sync_redis: redis.Redis) -> None:
    order = demo_order(4471)
    put_orders_sync(sync_redis, settings, [order])
    add_jobs(settings, "render_tickets", [4471])
    async with running(settings.replace(**FAST), load_registry()) as w:
        await eventually(lambda: w.stats.total("handled") == 1, what="rendered")
    pdf = Path(settings.tickets_dir) / "order-4471.pdf"
    qpdf_check(pdf)
    text = pdf_text(pdf)
    for ticket in order.tickets:
        assert ticket.admission_code in text
    assert len(pypdf.PdfReader(pdf).pages) == len(order.tickets)
    assert not list(pdf.parent.glob(".*.tmp"))   # no temporary file left behind
    assert sync_redis.hget(settings.key("order", 4471), "rendered") == str(pdf).encode()


async def test_refund_cancels_rendered_tickets(settings: Settings,
                                               sync_redis: redis.Redis) -> None:
    put_orders_sync(sync_redis, settings, [demo_order(5)])
    add_jobs(settings, "render_tickets", [5])
    pdf = Path(settings.tickets_dir) / "order-5.pdf"
    async with running(settings.replace(**FAST), load_registry()) as w:
        await eventually(pdf.exists, what="PDF rendered")
        # The refund job for the same order, with its own outbox id.
        from stagedoor.stream.job import make_job
        from stagedoor.stream.queue import enqueue_sync

        enqueue_sync(sync_redis, settings, [make_job("refund", 5, 1005, "r", "t")])
        await eventually(lambda: w.stats.total("handled") == 2, what="refund handled")
    assert not pdf.exists()
    stored = sync_redis.hgetall(settings.key("order", 5))
    assert stored[b"status"] == b"refunded"
    assert int(stored[b"cancelled"]) == len(demo_order(5).tickets)


async def test_placement_that_finds_the_order_refunded_renders_nothing(
        settings: Settings, sync_redis: redis.Redis) -> None:
    put_orders_sync(sync_redis, settings, [demo_order(6)], status="refunded")
    add_jobs(settings, "render_tickets", [6])
    async with running(settings.replace(**FAST), load_registry()) as w:
        await eventually(lambda: w.stats.total("handled") == 1, what="handled")
    assert not (Path(settings.tickets_dir) / "order-6.pdf").exists()


async def test_handlers_are_idempotent_by_outbox_id(settings: Settings,
                                                    sync_redis: redis.Redis) -> None:
    put_orders_sync(sync_redis, settings, [demo_order(7)])
    add_jobs(settings, "render_tickets", [7])
    add_jobs(settings, "render_tickets", [7])   # the relay's retry duplicated the XADD
    # One at a time: the second delivery must find the first one's mark.  (Two at once
    # both render; the atomic write makes that harmless, the same file twice.)
    async with running(settings.replace(concurrency=1, **FAST), load_registry()) as w:
        await eventually(lambda: w.stats.total("handled") == 2, what="both handled")
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 0, what="acks")
    assert w.stats.total("duplicates") == 1


async def test_missing_order_is_a_permanent_error(settings: Settings,
                                                  sync_redis: redis.Redis) -> None:
    ensure_group_sync(sync_redis, settings)
    add_jobs(settings, "render_tickets", [999])
    async with running(settings.replace(**FAST), load_registry()):
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 1, what="dead letter")
    [dead] = dead_entries(sync_redis, settings)
    assert dead[b"dead:error"] == b"permanent error: PermanentError: order 999 not found"


def test_registry_from_module_attr() -> None:
    plugin = "tests.support.handlers.plugin"
    reg = load_registry([f"{plugin}:registry", f"{plugin}:pong", f"{plugin}:mapping"])
    assert {"render_tickets", "refund", "ping", "pong", "echo"} <= reg.kinds
    assert reg.get("ping").timeout == 2.0


def test_a_moved_handler_spec_loads_from_where_the_module_is_now(
        caplog: pytest.LogCaptureFixture) -> None:
    """An operator's settings may name the built-ins by their old module; that keeps
    working (with a warning that gives the new name), through loading.MOVED alone."""
    reg = load_registry(["stagedoor.handlers.tickets:registry"], builtin=False)
    assert reg.kinds == {"render_tickets", "refund"}
    assert "'stagedoor.tickets.handlers:registry'" in caplog.text
    assert load_registry(builtin=False).kinds == set()
    assert load_registry().kinds == reg.kinds


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_a_moved_module_is_gone_from_its_old_place(old: str, new: str) -> None:
    """No shim module stays behind: the table is the one place an old name resolves."""
    assert importlib.util.find_spec(old) is None
    assert importlib.util.find_spec(new) is not None


@pytest.mark.parametrize(("spec", "message"), [
    ("tests.no_such_module:registry", "cannot import 'tests.no_such_module'"),
    ("tests.support.handlers.plugin:missing", "has no 'missing'"),
    ("tests.support.handlers.plugin:not_a_registry", "is not a Registry"),
])
def test_bad_handler_spec_is_a_config_error(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_registry([spec])


@pytest.mark.parametrize("workers", [2, 1], ids=["two-workers", "one-worker"])
async def test_two_deliveries_of_one_job_never_run_their_side_effect_at_once(
        settings: Settings, sync_redis: redis.Redis, workers: int) -> None:
    """The relay duplicated an XADD: two workers got one copy each, or one worker with
    free slots read both (the lease names `<consumer>/<entry id>`, not the consumer)."""
    import asyncio
    import contextlib

    from stagedoor.handlers import Registry
    from stagedoor.stream.job import Job

    effects: list[str] = []
    running_now: list[int] = []
    overlap = [False]
    reg = Registry()

    @reg.register("effect")
    async def effect(job: Job, ctx: object) -> None:
        from stagedoor.handlers import Context

        assert isinstance(ctx, Context)
        if await ctx.already_done(job):
            return
        overlap[0] = overlap[0] or bool(running_now)
        running_now.append(job.outbox_id)
        await asyncio.sleep(0.3)
        effects.append(ctx.consumer)
        running_now.remove(job.outbox_id)
        await ctx.mark_done(job)

    add_jobs(settings, "effect", [9])
    add_jobs(settings, "effect", [9])
    s = settings.replace(**{**FAST, "concurrency": 1 if workers == 2 else 8, "retries": 10,
                            "retry_backoff": 0.05})
    async with contextlib.AsyncExitStack() as stack:
        ws = [await stack.enter_async_context(running(s, reg, slot=i + 1))
              for i in range(workers)]
        await eventually(lambda: sum(w.stats.total("handled") for w in ws) == 2,
                         what="both deliveries settled")
    assert len(effects) == 1 and not overlap[0]
    assert sum(w.stats.total("retried") for w in ws) >= 1
    assert sum(w.stats.total("duplicates") for w in ws) == 1
    assert not sync_redis.exists(settings.key("running", 9))


async def test_render_warns_of_missing_fonts_and_counts_missing_glyphs(
        settings: Settings, sync_redis: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    """A configured font file that is missing: one warning at boot naming the script it
    leaves without a font; a character no font has: drawn as a replacement mark and
    counted in the worker's missing_glyphs counter."""
    from stagedoor.render import fonts
    from stagedoor.render.order import Order

    base = demo_order(8801).tickets[0]
    order = Order(order_id=8801, tickets=(dataclasses.replace(
        base, buyer="Анна \U0010fffd\U0010fffe Лебедева"),))
    put_orders_sync(sync_redis, settings, [order])
    add_jobs(settings, "render_tickets", [8801])
    # only the configured fonts: the installed ones are not searched for Cyrillic
    s = settings.replace(**FAST, render_fonts=["Cyrl=NoSuchCyrillic-Regular.ttf"],
                         render_font_discover=0)
    try:
        with caplog.at_level("WARNING"):
            async with running(s, load_registry()) as w:
                await eventually(lambda: w.stats.total("handled") == 1, what="rendered")
    finally:
        fonts.use(fonts.plan())
    warnings = [r.getMessage() for r in caplog.records if "fonts missing" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "NoSuchCyrillic-Regular.ttf" in warnings[0]
    assert "scripts without a font: Cyrl" in warnings[0]
    # counted in the worker's render process: its count comes back with each reply
    assert w.stats.counters["missing_glyphs"]["render_tickets"] == 2
    text = pdf_text(Path(settings.tickets_dir) / "order-8801.pdf")
    assert "Анна" in text and "Лебедева" in text          # drawn by the fallback font


async def test_an_order_no_font_covers_is_printed_warned_of_and_counted(
        settings: Settings, sync_redis: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    """Tibetan prints (its face is found among the installed fonts); Vithkuqi, which no
    installed font has, prints as replacement marks, and the worker logs the order id
    with the script and counts the order in missing_glyph_orders; at boot it warns of
    the scripts no face covers."""

    base = demo_order(8802).tickets[0]
    order = Order(order_id=8802, tickets=(dataclasses.replace(
        base, buyer="བཀྲ་ཤིས \U00010570\U00010571"),))
    clean = Order(order_id=8803, tickets=(dataclasses.replace(base, buyer="བཀྲ་ཤིས"),))
    put_orders_sync(sync_redis, settings, [order, clean])
    add_jobs(settings, "render_tickets", [8802, 8803])
    with caplog.at_level("WARNING"):
        async with running(settings.replace(**FAST), load_registry()) as w:
            await eventually(lambda: w.stats.total("handled") == 2, what="rendered")
    assert w.stats.counters["missing_glyphs"]["render_tickets"] == 2   # two Vithkuqi letters
    lines = [r.getMessage() for r in caplog.records]
    per_order = [m for m in lines if "printed with replacement marks" in m]
    assert per_order == ["order 8802 printed with replacement marks: no font has Vith (2)"], lines
    assert w.stats.counters["missing_glyph_orders"]["render_tickets"] == 1
    boot = [m for m in lines if "scripts have no font" in m]
    assert len(boot) == 1 and " Vith" in boot[0], lines
    assert "Tibt" not in boot[0]
    text = pdf_text(Path(settings.tickets_dir) / "order-8803.pdf")
    assert "བཀྲ་ཤིས" in text.replace(" ", "")
