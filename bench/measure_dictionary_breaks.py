"""What ICU's dictionary breaks cost a wrapped Lao, Myanmar or Khmer field:
`PYTHONPATH=src python -m bench.measure_dictionary_breaks`.

Every figure from this process, in this run, side by side, per script:

- median and P95 ms of rendering a one-ticket order whose event, venue and buyer wrap
  (three wrapped fields of the script; distinct orders, warm process);
- median microseconds of `_render.dictionary_breaks` on one such field's text: the
  work the wrap adds per field (dict_breaks in render/_native/dictbreaks.pxi: an ICU
  line break iterator opened, run and closed per run of the script), and that times
  three as a share of the order's median.

Prints JSON.  Not a target of its own: the per-script P95 targets are bench/
scripts_measure.py's.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from typing import Any

from stagedoor.demo.orders import demo_order
from stagedoor.render.order import Order

WORDS = {
    "lao": ("lo", ["ຫໍ", "ວັດທະນະທຳ", "ແຫ່ງຊາດ", "ນະຄອນຫຼວງ", "ວຽງຈັນ", "ສະຖານທີ່", "ຈັດງານ",
                   "ສະແດງ", "ດົນຕີ"]),
    "myanmar": ("my", ["မန္တလေး", "မြို့", "ရှိ", "အမျိုးသား", "ပြဇာတ်ရုံ", "တွင်", "ရန်ကုန်",
                       "ဂီတ", "အဖွဲ့", "၏", "ဖျော်ဖြေပွဲ"]),
    "khmer": ("km", ["សាល", "មហោស្រព", "ជាតិ", "នៅ", "រាជធានី", "ភ្នំពេញ", "សម្រាប់", "ការ",
                     "ប្រគុំ", "តន្ត្រី", "បុរាណ"]),
}
FIELD_WORDS = 16      # words run together: two lines of the event, venue and buyer


def texts(script: str, n: int, seed: int) -> list[str]:
    import random

    rnd = random.Random(seed)
    words = WORDS[script][1]
    return ["".join(rnd.choice(words) for _ in range(FIELD_WORDS)) for _ in range(n)]


def orders(script: str, n: int, seed: int) -> list[Order]:
    base = demo_order(1).tickets[0]
    locale = WORDS[script][0]
    return [Order(order_id=base.order_id, locale=locale, tickets=(dataclasses.replace(
        base, event=t, venue=t[len(t) // 3:] + t[:len(t) // 3], buyer=t),))
        for t in texts(script, n, seed)]


def measure(script: str, n: int = 1000) -> dict[str, Any]:
    from stagedoor import _render

    for o in orders(script, 200, seed=99):
        _render.render_order(o)
    clock = time.perf_counter_ns
    times = []
    for o in orders(script, n, seed=1):
        t0 = clock()
        _render.render_order(o)
        times.append((clock() - t0) / 1e6)
    times.sort()
    field = texts(script, 1, seed=7)[0]
    per = []
    # (an extension built before dictbreaks.pxi has no dictionary_breaks: the order
    # figures alone, for a before/after comparison)
    for _ in range(2000 if hasattr(_render, "dictionary_breaks") else 0):
        t0 = clock()
        _render.dictionary_breaks(field)
        per.append((clock() - t0) / 1e3)
    med = statistics.median(times)
    us = statistics.median(per) if per else 0.0
    return {"script": script, "n": n, "order_median_ms": round(med, 4),
            "order_p95_ms": round(times[int(0.95 * (len(times) - 1))], 4),
            "field_chars": len(field), "dictionary_us_per_field": round(us, 2),
            "dictionary_share_of_order": round(3 * us / 1000 / med, 3)}


def main() -> int:
    print(json.dumps([measure(s) for s in WORDS], indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
