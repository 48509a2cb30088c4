"""Orders and their tickets: the data model, and the store the handlers read.

A job carries only the order id; the handler reads the order's *current* state on
every run (the seed's Topic 45), because jobs for one order can finish in any
order across workers.  The store is a Redis hash per order:

    stagedoor:order:<id>   data      JSON of the order and its tickets
                           status    placed | refunded
                           rendered  path of the PDF once written
                           cancelled count of tickets a refund cancelled

Status changes and the rendered mark are Lua scripts, so a render racing a refund
is decided in one place: whichever lands second sees the other and cleans up.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
import redis.asyncio as aioredis

from .config import Settings


class OrderDataError(ValueError):
    """Order JSON that does not make an order; the message says which field."""


@dataclass(frozen=True, slots=True)
class Ticket:
    event: str
    venue: str
    starts_at: str  # "2026-12-19 19:30", local time of the venue, as printed
    section: str
    row: str
    seat: str
    buyer: str
    price: str  # "EUR 49.00", as printed
    order_id: int
    admission_code: str
    small_print: str = ""


@dataclass(frozen=True, slots=True)
class Order:
    order_id: int
    tickets: tuple[Ticket, ...] = field(default_factory=tuple)

    def to_json(self) -> bytes:
        return orjson.dumps({"order_id": self.order_id,
                             "tickets": [asdict(t) for t in self.tickets]})

    @staticmethod
    def from_json(raw: bytes | str) -> Order:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise OrderDataError(f"order is not JSON: {e}") from None
        return order_from_dict(data)


_TICKET_TEXT = ("event", "venue", "starts_at", "section", "row", "seat", "buyer", "price",
                "admission_code")
MAX_TEXT = 200
MAX_TICKETS = 100


def order_from_dict(data: Any) -> Order:
    if not isinstance(data, dict):
        raise OrderDataError("order must be a JSON object")
    order_id = data.get("order_id")
    if not isinstance(order_id, int) or isinstance(order_id, bool) or order_id < 1:
        raise OrderDataError("order_id must be a positive integer")
    raw_tickets = data.get("tickets")
    if not isinstance(raw_tickets, list) or not raw_tickets:
        raise OrderDataError("tickets must be a non-empty list")
    if len(raw_tickets) > MAX_TICKETS:
        raise OrderDataError(f"at most {MAX_TICKETS} tickets per order")
    tickets = []
    for i, t in enumerate(raw_tickets):
        if not isinstance(t, dict):
            raise OrderDataError(f"tickets[{i}] must be an object")
        values: dict[str, Any] = {}
        for name in (*_TICKET_TEXT, "small_print"):
            value = t.get(name, "" if name == "small_print" else None)
            if not isinstance(value, str):
                raise OrderDataError(f"tickets[{i}].{name} must be a string")
            limit = 1000 if name == "small_print" else MAX_TEXT
            if len(value) > limit:
                raise OrderDataError(f"tickets[{i}].{name} longer than {limit} characters")
            values[name] = value
        if not values["admission_code"]:
            raise OrderDataError(f"tickets[{i}].admission_code is empty")
        tickets.append(Ticket(order_id=order_id, **values))
    return Order(order_id=order_id, tickets=tuple(tickets))


# -- the store ------------------------------------------------------------------------

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
        return self._settings.key("order", order_id)

    async def put(self, order: Order, status: str = "placed") -> None:
        await self._client.hset(self.key(order.order_id),
                                mapping={"data": order.to_json(), "status": status})

    async def get(self, order_id: int) -> StoredOrder | None:
        data, status, rendered = await self._client.hmget(
            self.key(order_id), ["data", "status", "rendered"])
        if data is None:
            return None
        return StoredOrder(Order.from_json(data), _text(status) or "placed",
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
        pipe.hset(settings.key("order", order.order_id),
                  mapping={"data": order.to_json(), "status": status})
    pipe.execute()


# -- demo data ------------------------------------------------------------------------

_EVENTS = [("Die Zauberflöte", "Staatsoper Unter den Linden"),
           ("The Nutcracker", "Royal Opera House"),
           ("Carmen (L'amour est un oiseau rebelle)", "Opéra Bastille"),
           ("Peer Gynt", "Nationaltheatret")]
_BUYERS = ["Zoë Ødegaard-Šimić", "José Ángel Núñez", "Ann O'Neil", "Łukasz Żółć",
           "Jürgen Weiß", "Chloé (Cleo) Dubois", "Back\\Slash Smith", "Mary-Jane Watson"]


def demo_order(order_id: int, rng: random.Random | None = None) -> Order:
    """A realistic order: 1-4 tickets, Latin names, prices, a unique admission code."""
    r = rng or random.Random(order_id)
    event, venue = r.choice(_EVENTS)
    buyer = r.choice(_BUYERS)
    day = 1 + order_id % 28
    section = r.choice(["Parkett", "1. Rang", "Balkon", "Loge"])
    row = str(r.randint(1, 30))
    first_seat = r.randint(1, 40)
    try:
        price = Decimal(r.choice(["29.00", "49.50", "89.00", "120.00"]))
    except InvalidOperation:  # pragma: no cover
        price = Decimal("0")
    tickets = tuple(
        Ticket(event=event, venue=venue, starts_at=f"2026-12-{day:02d} 19:30",
               section=section, row=row, seat=str(first_seat + i), buyer=buyer,
               price=f"EUR {price:.2f}", order_id=order_id,
               admission_code=f"SD-{order_id:08d}-{i + 1:02d}-{r.randrange(16**6):06X}",
               small_print="Valid for one admission. Doors open 45 minutes before the "
                           "performance. No re-entry. Resale only via stagedoor.")
        for i in range(r.randint(1, 4)))
    return Order(order_id=order_id, tickets=tickets)
