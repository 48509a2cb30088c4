"""`send_receipt`: write a plain-text receipt for an order, exactly once per outbox id.

The worker loads this module with `--handlers receipts.handlers:registry` (or
STAGEDOOR_HANDLERS).  The parts a handler of your own will have too:

* the job is the five fields (kind, order_id, outbox_id, request_id, trace): anything
  else the handler needs it reads by the order id, here from the order store, in its
  current state (jobs for one order may run in any order across workers);
* `ctx.already_done(job)` first and `ctx.mark_done(job)` last make it idempotent by
  outbox id: a redelivered or duplicated job is skipped, and two deliveries never run
  at the same time;
* slow or blocking work (files, CPU) goes through `ctx.to_thread`, so the worker's loop
  keeps reading and acknowledging;
* a missing order is permanent (dead-lettered at once, with the reason); anything
  transient (Redis away, a full disk) is retried with backoff, then left pending;
* log lines need no job fields: the worker adds request_id, trace and the job's ids to
  every line logged while the job runs; extras of your own are kept.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from stagedoor.handlers import Context, PermanentError, Registry
from stagedoor.render.order import Order
from stagedoor.stream.job import Job
from stagedoor.tickets.orders import OrderStore

log = logging.getLogger(__name__)
registry = Registry()


def format_receipt(order: Order) -> str:
    """The receipt's text: one line per ticket and the total.  Pure, easy to test."""
    lines = [f"Receipt for order {order.order_id}", ""]
    total: dict[str, float] = {}
    for t in order.tickets:
        lines.append(f"{t.event} | {t.starts_at} | {t.section} {t.row}-{t.seat} | {t.price}")
        currency, _, amount = t.price.partition(" ")
        total[currency] = total.get(currency, 0.0) + float(amount or 0)
    lines.append("")
    lines += [f"Total {currency} {amount:.2f}" for currency, amount in sorted(total.items())]
    return "\n".join(lines) + "\n"


def customer_tier(order: Order) -> str:
    return "gold" if len(order.tickets) >= 4 else "standard"


def receipts_dir(ctx: Context) -> Path:
    return Path(os.environ.get("RECEIPTS_DIR") or Path(ctx.settings.state_dir) / "receipts")


def write_receipt(path: Path, text: str) -> None:
    """Write-then-rename: a reader sees no receipt or the whole one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@registry.register("send_receipt", timeout=10.0)
async def send_receipt(job: Job, ctx: Context) -> None:
    if await ctx.already_done(job):
        return  # a duplicate: the receipt was written by an earlier delivery
    stored = await OrderStore(ctx.redis, ctx.settings).get(job.order_id)
    if stored is None:
        raise PermanentError(f"order {job.order_id} is not in the store")
    if stored.status != "placed":
        log.info("order %d is %s: no receipt", job.order_id, stored.status)
    else:
        path = receipts_dir(ctx) / f"receipt-{job.order_id}.txt"
        await ctx.to_thread(write_receipt, path, format_receipt(stored.order))
        log.info("receipt written", extra={"customer_tier": customer_tier(stored.order),
                                           "path": str(path)})
    await ctx.mark_done(job)
