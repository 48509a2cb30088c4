"""The order store the handlers read: one Redis hash per order.

A job carries only the order id; the handler reads the order's *current* state on
every run (the seed's Topic 45), because jobs for one order can finish in any
order across workers.  The store is a Redis hash per order:

    stagedoor:order:<id>   data      JSON of the order and its tickets
                           status    placed | refunded
                           rendered  path of the PDF once written
                           cancelled count of tickets a refund cancelled

Status changes and the rendered mark are Lua scripts, so a render racing a refund
is decided in one place: whichever lands second sees the other and cleans up.
The order itself (Order, Ticket, parsing) is stagedoor.render.order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from ..config import Settings
from ..render.order import Order, OrderDataError
from ..stream.keys import order_key

# KEYS[1] order hash; ARGV[1] path. Mark rendered only if still placed.
_MARK_RENDERED = """
if redis.call('HGET', KEYS[1], 'status') == 'placed' then
  redis.call('HSET', KEYS[1], 'rendered', ARGV[1])
  return 1
end
return 0
"""
# KEYS[1] order hash. Refund: set status, return the rendered path (or false) to cancel.
_REFUND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, false} end
redis.call('HSET', KEYS[1], 'status', 'refunded')
local rendered = redis.call('HGET', KEYS[1], 'rendered')
redis.call('HDEL', KEYS[1], 'rendered')
return {1, rendered}
"""


STATUSES = ("placed", "refunded")


def check_stored(order_id: int, order: Order, status: str, rendered: str | None
                 ) -> StoredOrder:
    """An order as stored, refused when it contradicts itself or its key.

    A hash under order:115 whose data says order 999 would print ORDER 999 on
    order-115.pdf; a status we do not know (say "shipped") would be rendered and then
    taken for a refund by the mark-rendered script.  Both are data errors."""
    if order.order_id != order_id:
        raise OrderDataError(f"stored under order {order_id} but its data is for order "
                             f"{order.order_id}")
    if status not in STATUSES:
        raise OrderDataError(f"unknown order status {status[:40]!r} (expected "
                             f"{' or '.join(STATUSES)})")
    return StoredOrder(order, status, rendered)


@dataclass(frozen=True, slots=True)
class StoredOrder:
    order: Order
    status: str
    rendered: str | None


def _text(value: bytes | str | None) -> str:
    return value.decode() if isinstance(value, bytes) else (value or "")


class OrderStore:
    def __init__(self, client: aioredis.Redis, settings: Settings) -> None:
        self._client = client
        self._settings = settings
        self._mark = client.register_script(_MARK_RENDERED)
        self._refund = client.register_script(_REFUND)

    def key(self, order_id: int) -> str:
        return order_key(self._settings, order_id)

    async def put(self, order: Order, status: str = "placed") -> None:
        await self._client.hset(self.key(order.order_id),
                                mapping={"data": order.to_json(), "status": status})

    async def get(self, order_id: int) -> StoredOrder | None:
        data, status, rendered = await self._client.hmget(
            self.key(order_id), ["data", "status", "rendered"])
        if data is None:
            return None
        return check_stored(order_id, Order.from_json(data), _text(status) or "placed",
                            _text(rendered) or None)

    async def mark_rendered(self, order_id: int, path: str) -> bool:
        return bool(await self._mark(keys=[self.key(order_id)], args=[path]))

    async def refund(self, order_id: int) -> tuple[bool, str | None]:
        """(order existed, path of the PDF to cancel or None)."""
        found, rendered = await self._refund(keys=[self.key(order_id)])
        return bool(found), rendered.decode() if rendered else None

    async def add_cancelled(self, order_id: int, tickets: int) -> None:
        await self._client.hincrby(self.key(order_id), "cancelled", tickets)


def put_orders_sync(client: Any, settings: Settings, orders: Iterable[Order],
                    status: str = "placed") -> None:
    """OrderStore.put for many orders from a blocking client (the api side, the demo)."""
    pipe = client.pipeline(transaction=False)
    for order in orders:
        pipe.hset(order_key(settings, order.order_id),
                  mapping={"data": order.to_json(), "status": status})
    pipe.execute()
