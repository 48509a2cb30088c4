"""The long fuzz run of both ticket renderers: `PYTHONPATH=src:. python -m bench.fuzz_render`.

    python -m bench.fuzz_render --minutes 30                    # hypothesis (default)
    python -m bench.fuzz_render --minutes 30 --engine atheris   # coverage-guided
    python -m bench.fuzz_render --seconds 60 --src /other/checkout/src --no-save

Hostile orders (tests/support/render_fuzz.py says what they are made of) go to the native and
the reference renderer in a child process, so an abort or a hang is reported with its
input instead of ending the run.  What fails (a crash, a hang, an exception of the
native renderer on an order the parser accepts) is printed and added to
tests/support/render_crash_corpus.json (unless --no-save), which tests/render/test_render_crash.py
renders on every run: fix it, and it stays fixed.  The normal test run fuzzes for
SD_FUZZ_SECONDS (30 by default).

Engines:
- hypothesis: generated orders, each failure shrunk to a small one.
- atheris (pip install atheris): libFuzzer mutating bytes that decode to an order,
  guided by the coverage of the Python it instruments (the order parser and the
  reference renderer, which mirrors the native one step by step; the extension itself is
  not instrumented: that would need it built with clang -fsanitize=fuzzer-no-link).
  libFuzzer stops at a crash after writing it as an artifact; it is started again on
  the same coverage corpus until the time is up, and the artifacts are decoded back
  into orders.

Prints a JSON summary: cases, cases per second, failures, the reference renderer's
distinct exceptions (REFERENCE_LIMITS in tests/support/render_fuzz.py), how many parsed orders
the two renderers gave different bytes.  Exit status 1 when something failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.render_fuzz import (
    ROOT,
    TEXT_FIELDS,
    Failure,
    RenderChild,
    add_to_corpus,
    fuzz,
    order_json,
)


def run_hypothesis(seconds: float, src: Path) -> dict[str, Any]:
    child = RenderChild(src=src)
    t0 = time.monotonic()
    failures: list[Failure] = []
    try:
        for f in fuzz(seconds, child):
            print(f"FAILURE {f.what[:300]}\n  order: {f.order}", file=sys.stderr, flush=True)
            failures.append(f)
    finally:
        child.close()
    took = time.monotonic() - t0
    return {"engine": "hypothesis", "seconds": round(took, 1), "cases": child.cases,
            "cases_per_second": round(child.cases / took, 1) if took else 0,
            "failures": [f.entry() for f in failures],
            "reference_errors": sorted(child.reference_errors),
            "different_bytes": child.different}


# -- atheris ------------------------------------------------------------------------------

def _alphabet() -> list[str]:
    from tests.support import render_fuzz as rf

    return [*rf.SPECIALS, *rf.BIDI_CONTROLS, *rf.REGIONAL, *rf.MARKS, *rf.EMOJI,
            *rf.TAG_LETTERS, *rf.SKIN_TONES]


def decode(data: bytes) -> str:
    """The order libFuzzer's bytes stand for: up to three fields, each a run of steps
    that add a code point (any), a character of the hostile alphabet (render_fuzz's
    flags, tags, marks, controls, specials), a script sample, or repeat the last one."""
    import atheris
    from tests.support.render_fuzz import SCRIPT_SAMPLES

    alphabet = _alphabet()
    fdp = atheris.FuzzedDataProvider(data)
    fields: dict[str, str] = {}
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        name = TEXT_FIELDS[fdp.ConsumeIntInRange(0, len(TEXT_FIELDS) - 1)]
        limit = 1000 if name == "small_print" else 200
        out: list[str] = []
        for _ in range(fdp.ConsumeIntInRange(0, 40)):
            step = fdp.ConsumeIntInRange(0, 3)
            if step == 0:
                out.append(chr(fdp.ConsumeIntInRange(0, 0x10FFFF)))
            elif step == 1:
                out.append(alphabet[fdp.ConsumeIntInRange(0, len(alphabet) - 1)])
            elif step == 2:
                out.append(SCRIPT_SAMPLES[fdp.ConsumeIntInRange(0, len(SCRIPT_SAMPLES) - 1)])
            elif out:
                out.append(out[-1] * fdp.ConsumeIntInRange(1, 50))
        fields[name] = "".join(out)[:limit]
    return order_json(fields)


def atheris_child() -> None:
    """In the libFuzzer process: decode, parse, render with both renderers.  A native
    exception on a parsed order is raised (a finding); the reference's are not (see
    REFERENCE_LIMITS); an abort is libFuzzer's to catch and write down."""
    import atheris

    with atheris.instrument_imports():
        from stagedoor.render import reference
        from stagedoor.render.order import Order, OrderDataError
    from tests.support.render_fuzz import _direct_order

    from stagedoor import _render

    def one(data: bytes) -> None:
        text = decode(data)
        try:
            order = Order.from_json(text.encode())
        except OrderDataError:
            order = None
        if order is not None:
            _render.render_order(order)
            with contextlib.suppress(Exception):    # REFERENCE_LIMITS in render_fuzz.py
                reference.render_order(order)
        # without the parser (lone surrogates...): an exception is allowed, an abort is
        # not; the native renderer only (the reference's coverage is the parsed order's)
        with contextlib.suppress(Exception):
            _render.render_order(_direct_order(text))

    atheris.Setup([sys.argv[0], *sys.argv[2:]], one)
    atheris.Fuzz()


def run_atheris(seconds: float, src: Path) -> dict[str, Any]:
    try:
        import atheris  # noqa: F401
    except ImportError:
        raise SystemExit("atheris is not installed: .venv/bin/pip install atheris") from None
    import os

    work = Path(tempfile.mkdtemp(prefix="fuzz-render-"))
    (work / "corpus").mkdir()
    # seeds of a few hundred bytes: from libFuzzer's empty start, inputs grow a few bytes
    # a minute at this speed, and a few bytes decode to one or two characters
    rnd = random.Random(25)
    for i in range(32):
        (work / "corpus" / f"seed-{i}").write_bytes(rnd.randbytes(rnd.randint(64, 1024)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT), env.get("PYTHONPATH", "")])
    # libFuzzer stops at its first crash (its -fork mode cannot re-run a Python module):
    # started again on the same corpus until the time is up, a crash costs a restart
    t0 = time.monotonic()
    starts = 0
    with open(work / "libfuzzer.log", "wb") as log:
        while (left := seconds - (time.monotonic() - t0)) > 5:
            starts += 1
            cmd = [sys.executable, "-m", "bench.fuzz_render", "--atheris-child",
                   f"-max_total_time={int(left)}", "-timeout=30", "-rss_limit_mb=2048",
                   "-max_len=4096",
                   f"-artifact_prefix={work}/", str(work / "corpus")]
            subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=log, check=False)
            # a corpus input that crashed would crash the next start at once: drop it
            crashed = {a.read_bytes() for a in work.glob("crash-*")}
            for kept in (work / "corpus").iterdir():
                if kept.read_bytes() in crashed:
                    kept.unlink()
    took = time.monotonic() - t0
    text = (work / "libfuzzer.log").read_text(errors="replace")
    # "#1234 NEW cov: ..." lines: the executions of each start, summed over the starts
    runs, last = 0, 0
    for line in text.splitlines():
        head = line.split(maxsplit=1)[0] if line.strip() else ""
        if head.startswith("#") and head[1:].isdigit():
            n = int(head[1:])
            if n < last:
                runs += last
            last = n
    runs += last
    failures = []
    for art in sorted(work.glob("crash-*")) + sorted(work.glob("timeout-*")):
        kind = "crash" if art.name.startswith("crash-") else "hang"
        failures.append(Failure(decode(art.read_bytes()), f"{kind}: libFuzzer {art.name}"))
    for f in failures:
        print(f"FAILURE {f.what}\n  order: {f.order}", file=sys.stderr, flush=True)
    return {"engine": "atheris", "seconds": round(took, 1),
            "cases": runs, "starts": starts,
            "cases_per_second": round(runs / took, 1) if took else 0,
            "failures": [f.entry() for f in failures], "work_dir": str(work),
            "coverage_corpus_inputs": len(list((work / "corpus").iterdir()))}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--atheris-child":
        atheris_child()
        return 0
    ap = argparse.ArgumentParser(prog="python -m bench.fuzz_render",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=None, help="how long (default 30)")
    ap.add_argument("--seconds", type=float, default=None, help="how long, in seconds")
    ap.add_argument("--engine", choices=("hypothesis", "atheris"), default="hypothesis")
    ap.add_argument("--src", type=Path, default=ROOT / "src",
                    help="the stagedoor source tree to render with (default: this one)")
    ap.add_argument("--no-save", action="store_true",
                    help="do not add failures to tests/support/render_crash_corpus.json")
    a = ap.parse_args()
    seconds = a.seconds if a.seconds is not None else 60 * (a.minutes or 30)
    run = run_atheris if a.engine == "atheris" else run_hypothesis
    result = run(seconds, a.src.resolve())
    if not a.no_save and result["failures"]:
        result["added_to_corpus"] = add_to_corpus(
            [Failure(f["order"], f["failure"]) for f in result["failures"]])
    print(json.dumps(result, indent=2, ensure_ascii=True))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
