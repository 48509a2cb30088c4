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

render_tickets begins and finishes a job in one script each (BEGIN_RENDER: done mark,
lease and the order read; FINISH_RENDER: rendered mark, done mark, lease released),
run on the worker's lean connection.  Each touches one order's keys only (on a
cluster they must share the order's hash slot); the queue's keys are never in them.
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
from .render_pool import check_order_id

# KEYS[1] order hash. Refund: set status, return the rendered path (or false) to cancel.
_REFUND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, false} end
redis.call('HSET', KEYS[1], 'status', 'refunded')
local rendered = redis.call('HGET', KEYS[1], 'rendered')
redis.call('HDEL', KEYS[1], 'rendered')
return {1, rendered}
"""


# KEYS: done marks hash, lease, order hash, the old done key. ARGV: consumer, lease ms,
# outbox id.
# -> {'done'} | {'held', holder} | {'ok', data, status, rendered} (nil fields as nil)
# The lease is taken only after the order was read: a read error leaves no lease.
BEGIN_RENDER = """
if redis.call('HGET', KEYS[1], ARGV[3]) or redis.call('EXISTS', KEYS[4]) == 1 then
  return {'done'}
end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return {'held', holder} end
local o = redis.call('HMGET', KEYS[3], 'data', 'status', 'rendered')
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return {'ok', o[1], o[2], o[3]}
"""
# KEYS: order hash, done marks hash, lease. ARGV: path, kind, done ttl s, outbox id.
# Still placed: mark rendered, mark done, release the lease -> 1.  Refunded meanwhile:
# nothing written -> 0 (the handler removes its PDF, then marks done itself).
FINISH_RENDER = """
if redis.call('HGET', KEYS[1], 'status') ~= 'placed' then return 0 end
redis.call('HSET', KEYS[1], 'rendered', ARGV[1])
redis.call('HSET', KEYS[2], ARGV[4], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('DEL', KEYS[3])
return 1
"""


STATUSES = ("placed", "refunded")


def check_stored(order_id: int, order: Order, status: str, rendered: str | None
                 ) -> StoredOrder:
    """An order as stored, refused when it contradicts itself or its key.

    A hash under order:115 whose data says order 999 would print ORDER 999 on
    order-115.pdf (render_pool.check_order_id); a status we do not know (say "shipped")
    would be rendered and then taken for a refund by the mark-rendered script.  Both
    are data errors."""
    check_order_id(order_id, order)
    check_status(status)
    return StoredOrder(order, status, rendered)


def check_status(status: str) -> str:
    if status not in STATUSES:
        raise OrderDataError(f"unknown order status {status[:40]!r} (expected "
                             f"{' or '.join(STATUSES)})")
    return status


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

    async def status(self, order_id: int) -> str | None:
        """The order's status now, None when there is no such order."""
        status = await self._client.hget(self.key(order_id), "status")
        if status is None:      # no status field: placed, if the order is there at all
            return "placed" if await self._client.exists(self.key(order_id)) else None
        return _text(status)

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
