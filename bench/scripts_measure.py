"""Non-Latin render measurements: `PYTHONPATH=src python -m bench.scripts_measure`.

Every figure from this process, in this run, side by side:

- median and P95 per one-ticket order, 1 thread, for a Latin ticket (the Noto Sans fast
  path) and for tickets whose event and buyer are Cyrillic, Arabic and CJK, each over
  N distinct generated names (no order repeats, so no order's font is reused; the
  process is warm: glyph outlines are cached per process by design, and the warm-up
  orders use other names);
- throughput of the non-Latin tickets on 1 and 2 threads (GIL released), and, as the
  box's own ceiling for that ratio, on 1 and 2 processes at once (no GIL, nothing
  shared; not a target, the yardstick for the 2-thread one);
- reportlab drawing the same Cyrillic ticket with an embedded TrueType font (Noto Sans,
  the face the native renderer uses) and its QR widget, and the ratio;
- PDF bytes per order: one ticket per script, and an order of 4 CJK tickets;
- per script family, the worst-case pages of bench/ticket_corpus.py (every field
  with its family's hardest text; reported, not held to the targets);

Prints JSON and the targets missed (issue 11): Latin median <= 0.1 ms, non-Latin
median <= 0.3 ms and P95 <= 0.5 ms, 2 threads >= 1.8x one, >= 50x reportlab,
4 CJK tickets <= 40 KB.
"""

from __future__ import annotations

import dataclasses
import io
import json
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from stagedoor.demo.orders import demo_order
from stagedoor.render.order import Order, Ticket

RenderFn = Callable[[Order], bytes]
TARGETS = {"latin_median_ms": 0.1, "median_ms": 0.3, "p95_ms": 0.5,
           "scaling_2_threads": 1.8, "vs_reportlab": 50.0, "cjk_4_tickets_bytes": 40_000}

# Given names and surnames to combine (>= 1,000 distinct buyers per script).
NAMES = {
    "cyrillic": ("Александр Дмитрий Максим Сергей Андрей Алексей Артём Илья Кирилл Михаил "
                 "Анна Мария Елена Дарья Алина Ирина Екатерина Ольга Наталья Татьяна",
                 "Иванов Смирнов Кузнецов Попов Васильев Петров Соколов Михайлов Новиков "
                 "Фёдоров Морозов Волков Алексеев Лебедев Семёнов Егоров Павлов Козлов "
                 "Степанов Николаев Орлов Андреев Макаров Никитин Захаров Зайцев Соловьёв "
                 "Борисов Яковлев Григорьев Романов Воробьёв Сергеев Кузьмин Фролов Александров "
                 "Дмитриев Королёв Гусев Киселёв Ильин Максимов Поляков Сорокин Виноградов "
                 "Ковалёв Белов Медведев Антонов Тарасов Жуков Баранов Филиппов Комаров"),
    "arabic": ("محمد أحمد علي عمر يوسف خالد حسن إبراهيم مصطفى عبد الله فاطمة عائشة مريم "
               "زينب نور سارة ليلى هدى سلمى رنا",
               "العلي الحسن المصري الخطيب الحداد النجار السيد الشامي البغدادي القاسم "
               "الزين الأحمد الكردي العمر الرفاعي الحلبي الصالح السعدي الفارس الجمال "
               "التميمي الهاشمي الدوري الشريف العطار البيطار القدسي الخوري الحلو "
               "الراشد الظاهر المنصور العباسي الطحان الصباغ الكيالي الموصلي الحمصي "
               "النابلسي اليافي الحريري الأيوبي السباعي الخياط الدباغ"),
}
HAN = ("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶"
       "程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾"
       "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉萍红娥玲芬燕志文建国海春晓雪梅兰")
EVENTS = {
    "cyrillic": ["Лебединое озеро", "Щелкунчик", "Евгений Онегин", "Борис Годунов",
                 "Пиковая дама", "Спящая красавица", "Жизель", "Князь Игорь"],
    "arabic": ["ليلة في الأوبرا", "حفل أم كلثوم", "عايدة", "الليلة الكبيرة",
               "أمسية موسيقية", "ليالي الطرب", "حفل الربيع", "سهرة العود"],
    "cjk": ["天鹅湖", "胡桃夹子", "茶馆", "雷雨", "梁山伯与祝英台", "牡丹亭", "红楼梦",
            "图兰朵"],
}


# The scripts whose faces come from the installed fonts' coverage (issue 25): words of
# their sample orders (demo/scripts/), recombined into distinct names and events.
NEW_SCRIPTS = ("tibetan", "syriac", "thaana", "mongolian", "cherokee", "canadian-syllabics",
               "tifinagh", "urdu")


def _new_words() -> dict[str, tuple[str, list[str]]]:
    """script -> (its sample's locale, the words of its sample)."""
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "src" / "stagedoor" / "demo" / "scripts"
    out = {}
    for name in NEW_SCRIPTS:
        o = Order.from_json((folder / f"{name}.json").read_bytes())
        # words, and Tibetan syllables (tsheg-separated, with no spaces between words)
        words = {w for t in o.tickets for v in (t.event, t.venue, t.buyer, t.section,
                                                t.small_print)
                 for w in re.findall("[^\\s\u0f0b]+\u0f0b?", v)}
        out[name] = (o.locale, sorted(words))
    return out


def new_script_orders(n: int, seed: int) -> list[Order]:
    """One-ticket orders in the newly covered scripts, in turn, each with its locale
    (Urdu: Nastaliq), event and buyer three words of the script's sample."""
    samples = _new_words()
    locales = {name: samples[name][0] for name in NEW_SCRIPTS}
    words = {name: samples[name][1] for name in NEW_SCRIPTS}
    base = base_ticket()
    rng = random.Random(seed)
    out: list[Order] = []
    seen: set[str] = set()
    while len(out) < n:
        script = NEW_SCRIPTS[len(out) % len(NEW_SCRIPTS)]
        buyer = " ".join(rng.choice(words[script]) for _ in range(3))
        if buyer in seen:
            continue
        seen.add(buyer)
        i = len(out) + 1
        out.append(Order(order_id=i, locale=locales[script], tickets=(dataclasses.replace(
            base, event=" ".join(rng.choice(words[script]) for _ in range(2)), buyer=buyer,
            order_id=i, admission_code=f"SD-{i:08d}-01-{rng.randrange(16**6):06X}"),)))
    return out


def names(script: str, n: int, seed: int) -> list[str]:
    """n distinct buyer names in a script."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        if script == "cjk":
            han_given = "".join(rng.choice(HAN) for _ in range(rng.randint(1, 2)))
            name = rng.choice(HAN[:100]) + han_given
        else:
            given, family = (s.split() for s in NAMES[script])
            name = f"{rng.choice(given)} {rng.choice(family)}"
            if script == "cyrillic" and rng.random() < 0.5:
                name = f"{rng.choice(given)} {rng.choice(given)}ович {rng.choice(family)}"
            elif script == "arabic" and rng.random() < 0.5:
                name = f"{rng.choice(given)} {rng.choice(given)} {rng.choice(family)}"
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


def base_ticket() -> Ticket:
    return demo_order(1).tickets[0]


def orders(script: str, n: int, seed: int = 1) -> list[Order]:
    """One-ticket orders whose event and buyer are in `script` ("latin": the demo's)."""
    if script == "latin":
        return [Order(order_id=i + 1, tickets=demo_order(i + 1).tickets[:1]) for i in range(n)]
    if script == "new":
        return new_script_orders(n, seed)
    base = base_ticket()
    rng = random.Random(seed)
    return [Order(order_id=i + 1, tickets=(dataclasses.replace(
        base, event=rng.choice(EVENTS[script]), buyer=name, order_id=i + 1,
        admission_code=f"SD-{i + 1:08d}-01-{rng.randrange(16**6):06X}"),))
        for i, name in enumerate(names(script, n, seed))]


def _percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def latency(script: str, n: int = 2000, fn: RenderFn | None = None) -> dict[str, Any]:
    """ms per order over n distinct orders, after a warm-up on 300 other names."""
    from stagedoor import _render

    fn = fn or _render.render_order
    for o in orders(script, 300, seed=99):
        fn(o)
    work = orders(script, n, seed=1)
    clock = time.perf_counter_ns
    times = []
    for o in work:
        t0 = clock()
        fn(o)
        times.append((clock() - t0) / 1e6)
    times.sort()
    return {"script": script, "n": n, "median_ms": statistics.median(times),
            "p95_ms": _percentile(times, 0.95), "p99_ms": _percentile(times, 0.99)}


def throughput(threads: int, work: list[Order], fn: RenderFn) -> float:
    """Orders per second with `work` split over `threads` threads."""
    start = threading.Barrier(threads + 1)

    def run(k: int) -> None:
        start.wait()
        for o in work[k::threads]:
            fn(o)

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return len(work) / (time.perf_counter() - t0)


def mixed_orders(n: int) -> list[Order]:
    """3n non-Latin orders, Cyrillic, Arabic and CJK in turn: the scaling runs' work."""
    return [o for trio in zip(orders("cyrillic", n, 11), orders("arabic", n, 12),
                              orders("cjk", n, 13), strict=True) for o in trio]


def scaling(n: int = 3000, repeat: int = 3) -> dict[str, Any]:
    """Non-Latin orders (Cyrillic, Arabic, CJK in turn) on 1 and 2 threads, best of
    `repeat` each, distinct orders every time; the Latin orders alike, interleaved, as
    the control (its path has released the GIL from the start: on a box whose other
    core is busy neither reaches 2x, and the two ratios should still be alike)."""
    from stagedoor import _render

    fn = _render.render_order
    mixed = mixed_orders(n)
    latin = orders("latin", len(mixed))
    for o in mixed[:300] + latin[:300]:
        fn(o)
    best = {(w, t): 0.0 for w in ("nl", "latin") for t in (1, 2)}
    for _ in range(repeat):
        for threads in (1, 2):
            for which, work in (("nl", mixed), ("latin", latin)):
                best[which, threads] = max(best[which, threads],
                                           throughput(threads, work, fn))
    return {"orders_per_s_1": best["nl", 1], "orders_per_s_2": best["nl", 2],
            "scaling_2_threads": best["nl", 2] / best["nl", 1],
            "latin_scaling_2_threads": best["latin", 2] / best["latin", 1]}


def _process_worker(k: int, nproc: int, n: int, start: Any, out: Any) -> None:
    """One process of process_ceiling: its share of the non-Latin orders, timed."""
    from stagedoor import _render

    fn = _render.render_order
    mixed = mixed_orders(n)
    for o in mixed[:300]:
        fn(o)
    mine = mixed[k::nproc]
    start.wait()
    t0 = time.perf_counter()
    for o in mine:
        fn(o)
    out.put((len(mine), t0, time.perf_counter()))


def process_ceiling(n: int = 3000, repeat: int = 3) -> dict[str, Any]:
    """The same non-Latin orders on 1 process and on 2 processes at once, best of
    `repeat`: what this box gives two-way parallel render work with no GIL and no
    shared memory, the ceiling beside which to read the 2-thread ratio."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")

    def rate(nproc: int) -> float:
        out, start = ctx.Queue(), ctx.Barrier(nproc)
        ps = [ctx.Process(target=_process_worker, args=(k, nproc, n, start, out))
              for k in range(nproc)]
        for p in ps:
            p.start()
        got: list[tuple[int, float, float]] = [out.get() for _ in ps]
        for p in ps:
            p.join()
        return sum(g[0] for g in got) / (max(g[2] for g in got) - min(g[1] for g in got))

    best = {1: 0.0, 2: 0.0}
    for _ in range(repeat):
        for nproc in (1, 2):
            best[nproc] = max(best[nproc], rate(nproc))
    return {"orders_per_s_1_process": best[1], "orders_per_s_2_processes": best[2],
            "process_scaling_2": best[2] / best[1]}


def reportlab_render(order: Order, font_path: str, bold_path: str) -> bytes:
    """The same ticket with reportlab: Noto Sans embedded (TrueType subset), its QR."""
    from reportlab.graphics import renderPDF
    from reportlab.graphics.barcode.qr import QrCodeWidget
    from reportlab.graphics.shapes import Drawing
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    if "NotoSans" not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont("NotoSans", font_path))
        pdfmetrics.registerFont(TTFont("NotoSans-Bold", bold_path))
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=(420, 298))
    for t in order.tickets:
        c.setLineWidth(0.8)
        c.rect(12, 12, 396, 274)
        c.setFillColorRGB(0.11, 0.16, 0.29)
        c.rect(12, 250, 396, 36, fill=1, stroke=0)
        c.setFillColorRGB(1, 1, 1)
        c.setFont("NotoSans-Bold", 14)
        c.drawString(24, 262, t.event)
        c.setFillColorRGB(0, 0, 0)
        for text, x, y, bold in ((t.venue, 24, 227, 1), (t.starts_at, 24, 201, 0),
                                 (t.section, 24, 175, 1), (t.row, 130, 175, 1),
                                 (t.seat, 180, 175, 1), (t.buyer, 24, 149, 1),
                                 (t.price, 24, 123, 0), (str(t.order_id), 130, 123, 0),
                                 (t.admission_code, 24, 97, 1)):
            c.setFont("NotoSans-Bold" if bold else "NotoSans", 11)
            c.drawString(x, y, text)
        c.setFont("NotoSans", 5)
        c.drawString(24, 80, t.small_print)
        qr = QrCodeWidget(t.admission_code, barLevel="M")
        x0, y0, x1, y1 = qr.getBounds()
        d = Drawing(116, 116, transform=[116 / (x1 - x0), 0, 0, 116 / (y1 - y0), 0, 0])
        d.add(qr)
        renderPDF.draw(d, c, 288, 130)
        c.showPage()
    c.save()
    return buf.getvalue()


def versus_reportlab(n_native: int = 1000, n_reportlab: int = 30) -> dict[str, Any]:
    """Median ms per Cyrillic ticket: native (distinct orders) and reportlab."""
    from stagedoor.render import fonts

    plan = fonts.current()
    regular = plan.faces[plan.scripts["Cyrl"][0]]
    nat = latency("cyrillic", n_native)
    work = orders("cyrillic", n_reportlab, seed=5)
    reportlab_render(work[0], regular[0], plan.faces[regular[2]][0])
    times = []
    for o in work:
        t0 = time.perf_counter_ns()
        reportlab_render(o, regular[0], plan.faces[regular[2]][0])
        times.append((time.perf_counter_ns() - t0) / 1e6)
    rl = statistics.median(times)
    return {"native_median_ms": nat["median_ms"], "reportlab_median_ms": rl,
            "vs_reportlab": rl / nat["median_ms"]}


def sizes() -> dict[str, int]:
    """PDF bytes: a one-ticket order per sample script, and 4 CJK tickets in one order."""
    from pathlib import Path

    from stagedoor import _render

    out: dict[str, int] = {}
    samples = Path(__file__).resolve().parent.parent / "src" / "stagedoor" / "demo" / "scripts"
    for p in sorted(samples.glob("*.json")):
        o = Order.from_json(p.read_bytes())
        out[f"{p.stem}_1_ticket"] = len(_render.render_order(
            Order(order_id=o.order_id, tickets=o.tickets[:1], locale=o.locale)))
    cjk = orders("cjk", 4, seed=21)
    four = Order(order_id=7, tickets=tuple(
        dataclasses.replace(o.tickets[0], order_id=7) for o in cjk), locale="zh-CN")
    out["cjk_4_tickets"] = len(_render.render_order(four))
    return out


def family_latency(n: int = 1000) -> dict[str, Any]:
    """ms per order of bench/ticket_corpus.py's pages, one per script family, every
    field filled with that family's hardest text (long, wrapped and cut lines, tall
    stacks, hostile runs of marks): the worst case of the layout, not a typical ticket,
    so reported beside the targets rather than held to them."""
    from bench import ticket_corpus
    from stagedoor import _render

    out: dict[str, Any] = {}
    clock = time.perf_counter_ns
    for family in ticket_corpus.FAMILIES:
        base = ticket_corpus.family_order(family).tickets[0]
        work = [Order(order_id=i + 1, tickets=(dataclasses.replace(
            base, order_id=i + 1, admission_code=f"SD-{i + 1:08d}-01-{i:06X}"),))
            for i in range(n + 100)]
        for o in work[:100]:
            _render.render_order(o)
        times = []
        for o in work[100:]:
            t0 = clock()
            _render.render_order(o)
            times.append((clock() - t0) / 1e6)
        times.sort()
        out[family] = {"n": n, "median_ms": statistics.median(times),
                       "p95_ms": _percentile(times, 0.95)}
    return out


def measure_all(n: int = 2000) -> dict[str, Any]:
    lat = {s: latency(s, n) for s in ("latin", "cyrillic", "arabic", "cjk", "new")}
    return {"latency": lat, "families": family_latency(), "scaling": scaling(),
            "process_ceiling": process_ceiling(), "reportlab": versus_reportlab(),
            "bytes": sizes()}


def check(r: dict[str, Any]) -> list[str]:
    misses = []
    lat = r["latency"]
    if lat["latin"]["median_ms"] > TARGETS["latin_median_ms"]:
        misses.append(f"Latin median {lat['latin']['median_ms']:.4f} ms > 0.1 ms")
    for s in ("cyrillic", "arabic", "cjk", "new"):
        if lat[s]["median_ms"] > TARGETS["median_ms"]:
            misses.append(f"{s} median {lat[s]['median_ms']:.4f} ms > 0.3 ms")
        if lat[s]["p95_ms"] > TARGETS["p95_ms"]:
            misses.append(f"{s} P95 {lat[s]['p95_ms']:.4f} ms > 0.5 ms")
    if r["scaling"]["scaling_2_threads"] < TARGETS["scaling_2_threads"]:
        misses.append(f"2 threads {r['scaling']['scaling_2_threads']:.2f}x < 1.8x")
    if r["reportlab"]["vs_reportlab"] < TARGETS["vs_reportlab"]:
        misses.append(f"{r['reportlab']['vs_reportlab']:.1f}x reportlab < 50x")
    if r["bytes"]["cjk_4_tickets"] > TARGETS["cjk_4_tickets_bytes"]:
        misses.append(f"4 CJK tickets {r['bytes']['cjk_4_tickets']} bytes > 40 KB")
    return misses


def main() -> int:
    results = measure_all()
    results["targets_missed"] = check(results)
    print(json.dumps(results, indent=2, ensure_ascii=False))
    return 1 if results["targets_missed"] else 0


if __name__ == "__main__":
    sys.exit(main())
