"""Required ticket fields that are empty or only white space are refused when the order
is parsed (issue 25: they used to print blank), with a reason naming the field; a
worker dead-letters the job with that reason and writes no PDF."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.handlers import load_registry
from stagedoor.render.order import Order, OrderDataError
from stagedoor.tickets.orders import put_orders_sync
from tests.support.worker import add_jobs, dead_entries, eventually, running

FAST = {"block_ms": 100, "reclaim_interval": 0.05, "retry_backoff": 0.001}
REQUIRED = ("event", "venue", "starts_at", "section", "row", "seat", "buyer", "price",
            "admission_code")
BLANK = {"empty": "", "spaces": "   ", "ideographic space": "\u3000\u3000",
         "tabs and newlines": "\t\n\r\n", "line separator": "\u2028",
         "zero-width space and BOM": "\u200b\ufeff", "Hangul filler": "\u3164"}


def _with(order: Order, **fields: str) -> Order:
    t = dataclasses.replace(order.tickets[-1], **fields)
    return dataclasses.replace(order, tickets=(*order.tickets[:-1], t))


@pytest.mark.parametrize("field", REQUIRED)
@pytest.mark.parametrize("kind", sorted(BLANK))
def test_blank_required_field_is_refused_naming_it(field: str, kind: str) -> None:
    order = _with(demo_order(12), **{field: BLANK[kind]})
    last = len(order.tickets) - 1
    with pytest.raises(OrderDataError) as e:
        Order.from_json(order.to_json())
    assert str(e.value) == f"tickets[{last}].{field} is empty or only white space"


@pytest.mark.parametrize("value", [" x ", "\u3000東京", "A", "\u0301", "0"])
def test_text_with_ink_is_accepted(value: str) -> None:
    order = _with(demo_order(12), buyer=value)
    assert Order.from_json(order.to_json()).tickets[-1].buyer == value


def test_small_print_may_be_blank() -> None:
    order = _with(demo_order(12), small_print=" \u3000")
    assert Order.from_json(order.to_json()).tickets[-1].small_print == " \u3000"


async def test_worker_dead_letters_an_order_with_a_blank_field(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """On a real worker and server: the order whose buyer is U+3000 and a tab is
    dead-lettered with the field named, no PDF; the order beside it is printed."""
    blank = _with(demo_order(31), buyer="\u3000\t")
    put_orders_sync(sync_redis, settings, [blank, demo_order(32)])
    add_jobs(settings, "render_tickets", [31, 32])
    async with running(settings.replace(**FAST), load_registry()) as w:
        await eventually(lambda: sync_redis.xlen(settings.dead_stream) == 1,
                         what="dead letter")
        await eventually(lambda: w.stats.total("handled") >= 1, what="order 32 rendered")
    [dead] = dead_entries(sync_redis, settings)
    last = len(blank.tickets) - 1
    assert dead[b"dead:error"] == (
        f"permanent error: PermanentError: order 31: tickets[{last}].buyer is empty or "
        "only white space").encode()
    assert not (Path(settings.tickets_dir) / "order-31.pdf").exists()
    assert (Path(settings.tickets_dir) / "order-32.pdf").exists()
