"""Orders and their tickets: what a PDF is rendered from, parsed and bounded.

`Order.from_json` / `order_from_dict` turn the api's JSON into an Order or raise
OrderDataError naming the field; the limits (MAX_TICKETS, MAX_TEXT) bound what one
render costs, and every ticket field but the small print is required: empty or only
white space (is_blank) is refused, not printed blank.  The store that keeps orders in
Redis is stagedoor.tickets.orders.
"""

from __future__ import annotations

import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from ..errors import StagedoorError


class OrderDataError(StagedoorError, ValueError):
    """Order JSON that does not make an order; the message says which field."""


class RenderFailed(OrderDataError):
    """The renderer raised on this order.  A render is a function of the order and the
    fonts, so another delivery would fail the same way: the job is dead-lettered with
    this reason (render_tickets), not retried until it counts as poison."""

    @classmethod
    def of(cls, e: Exception) -> RenderFailed:
        return cls(f"render failed: {type(e).__name__}: {e}"[:500])


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
    # BCP 47 tag of the buyer's language ("ja-JP", "zh-TW"), optional: it picks the face
    # of Han characters (render/fonts.py: han_faces)
    locale: str = ""

    def to_json(self) -> bytes:
        data: dict[str, Any] = {"order_id": self.order_id,
                                "tickets": [asdict(t) for t in self.tickets]}
        if self.locale:
            data["locale"] = self.locale
        return orjson.dumps(data)

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
MAX_LOCALE = 35       # the longest BCP 47 tag worth keeping (RFC 5646 section 4.4.1)


# What prints nothing: white space of every kind (spaces, U+3000, tabs, newlines, U+2028),
# controls, format characters (ZWSP, ZWJ, BOM, bidi marks, soft hyphen) and the Hangul
# and Braille fillers, which are letters and symbols that draw no ink.
_BLANK_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})
_BLANK_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def is_blank(value: str) -> bool:
    """Whether the text would print nothing: empty, or only the characters above."""
    for ch in value:                # a name's first character usually decides
        if not ch.isspace() and ch not in _BLANK_FILLERS and (
                unicodedata.category(ch) not in _BLANK_CATEGORIES):
            return False
    return True


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
    locale = data.get("locale", "")
    if not isinstance(locale, str) or len(locale) > MAX_LOCALE:
        raise OrderDataError(f"locale must be a string of at most {MAX_LOCALE} characters")
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
        for name in _TICKET_TEXT:   # required: a ticket printed with a blank buyer or seat
            if is_blank(values[name]):  # is no ticket (issue 25); the job is dead-lettered
                raise OrderDataError(f"tickets[{i}].{name} is empty or only white space")
        tickets.append(Ticket(order_id=order_id, **values))
    return Order(order_id=order_id, tickets=tuple(tickets), locale=locale)
