"""Demo data: realistic random orders for the demo command, the tests and the benchmarks."""

from __future__ import annotations

import dataclasses
import functools
import random
from decimal import Decimal, InvalidOperation
from importlib import resources

from ..render.order import Order, Ticket

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


@functools.cache
def script_samples() -> dict[str, Order]:
    """The sample order of each script (demo/scripts/<script>.json), by script name."""
    folder = resources.files(__package__) / "scripts"
    return {p.name.removesuffix(".json"): Order.from_json(p.read_bytes())
            for p in sorted(folder.iterdir(), key=lambda p: p.name)
            if p.name.endswith(".json")}


def world_order(order_id: int, rng: random.Random | None = None) -> Order:
    """A realistic order in one of the sample scripts (Greek, Cyrillic, Arabic, Hebrew,
    Devanagari, Thai, Chinese, Japanese, Korean, Vietnamese..., mixed direction):
    1-4 tickets, its buyers, its locale, unique admission codes."""
    r = rng or random.Random(order_id)
    samples = script_samples()
    sample = samples[r.choice(sorted(samples))]
    first_seat = r.randint(1, 40)
    tickets = tuple(
        dataclasses.replace(
            r.choice(sample.tickets), order_id=order_id, seat=str(first_seat + i),
            admission_code=f"SD-{order_id:08d}-{i + 1:02d}-{r.randrange(16**6):06X}")
        for i in range(r.randint(1, 4)))
    return Order(order_id=order_id, tickets=tickets, locale=sample.locale)
