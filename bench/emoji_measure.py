"""What the colour emoji path costs: `PYTHONPATH=src python -m bench.emoji_measure`.

Every figure from this process, in this run, side by side (issue 39 item 3):

- the first emoji of the process (it opens NotoColorEmoji.ttf, memory-mapped);
- first use of a colour glyph: a one-ticket order whose buyer has an emoji this
  process has not drawn yet (its PNG decoded, split into RGB and alpha, both deflated:
  render/_native/emoji.pxi), against the same order rendered again (warm), and against
  the first use of a monochrome outline glyph (a Han character not drawn yet);
- warm, per one-ticket order (median and P95 over interleaved rounds): a shaped buyer
  without emoji (a Latin name with a Vietnamese letter, which takes the shaped path),
  the same with one emoji, with a flag, a skin tone and a ZWJ family, and the same four
  with the colour font left out of the plan (each sequence printed as its base emoji);
- PDF bytes of those orders (the colour glyphs' images are in every order using them).

Prints JSON.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from stagedoor import _render
from stagedoor.render import fonts
from stagedoor.render.order import Order, Ticket

ROUNDS = 2000
FIRST_USE = 40
SEQUENCES = ("\U0001F1EF\U0001F1F5 \U0001F469\U0001F3FD "
             "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466")


def order(buyer: str, n: int) -> Order:
    t = Ticket(event="Gala night", venue="Hall 3", starts_at="2026-12-19 19:30",
               section="A", row="3", seat=str(n % 90 + 1), buyer=buyer, price="EUR 49.00",
               order_id=n, admission_code=f"SD-{n:08d}")
    return Order(n, (t,))


def ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"median_ms": round(statistics.median(s) * 1e3, 4),
            "p95_ms": round(s[int(0.95 * (len(s) - 1))] * 1e3, 4)}


def timed(o: Order) -> float:
    t0 = time.perf_counter()
    _render.render_order(o)
    return time.perf_counter() - t0


def first_use() -> dict[str, object]:
    """Emoji and Han characters the process has not drawn: the first render of each
    pays for its glyph, the second is warm."""
    cold_e, warm_e, cold_h, warm_h = [], [], [], []
    _render.render_order(order("Nguyễn Anh", 0))     # the text faces open: not counted
    for k in range(FIRST_USE):
        e = order(f"Nguyễn Anh {chr(0x1F400 + k)}", k)
        h = order(f"Nguyễn Anh {chr(0x5000 + k)}", k)
        cold_e.append(timed(e))
        warm_e.append(timed(e))
        cold_h.append(timed(h))
        warm_h.append(timed(h))
    return {"first_emoji_of_the_process_ms": round(cold_e[0] * 1e3, 3),
            "colour_emoji_first_use": ms(cold_e), "colour_emoji_same_order_warm": ms(warm_e),
            "outline_glyph_first_use": ms(cold_h), "outline_glyph_same_order_warm": ms(warm_h)}


def warm(variants: dict[str, str], rounds: int) -> dict[str, dict[str, float]]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for extra in variants.values():       # warm-up: every glyph drawn once
        _render.render_order(order("Nguyễn Anh" + extra, 0))
    for i in range(rounds):
        for name, extra in variants.items():
            times[name].append(timed(order(f"Nguyễn Anh {i % 97}" + extra, i)))
    return {name: ms(t) for name, t in times.items()}


def sizes(variants: dict[str, str]) -> dict[str, int]:
    return {name: len(_render.render_order(order("Nguyễn Anh" + extra, 1)))
            for name, extra in variants.items()}


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS
    plan = fonts.plan()
    if not plan.emoji:
        print("no colour emoji font in the plan (apt-get install fonts-noto-color-emoji)",
              file=sys.stderr)
        return 1
    fonts.use(plan)
    report: dict[str, object] = {"first_use": first_use()}
    variants = {"no_emoji": "", "one_emoji": " \U0001F3AB", "sequences": " " + SEQUENCES}
    colour = warm(variants, rounds)
    report["bytes"] = sizes(variants)
    fonts.use(fonts.plan(emoji_fonts=()))       # render_emoji_fonts empty
    mono = warm({"one_emoji_mono": " \U0001F3AB", "sequences_mono": " " + SEQUENCES},
                rounds)
    report["bytes_mono"] = sizes({"sequences_mono": " " + SEQUENCES})
    fonts.use(plan)
    report["warm_per_ticket"] = {**colour, **mono}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
