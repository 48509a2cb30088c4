"""Fuzzing both ticket renderers with hostile text, every render in a child process.

The renderers hand buyer-typed text to C libraries (HarfBuzz, fribidi, libunibreak,
libthai).  One of them aborted the process on a flag emoji (issue 25), and an abort
cannot be caught in the process it kills: so the renders run in a child (`serve`, one
JSON line in, one out), and the parent (`RenderChild`) sees an abort as the child's
death by a signal, a hang as no answer within the time limit, and respawns it.

What a case is: the text of an order as the api sends it (JSON, lone surrogates as
\\u escapes).  The child parses it as the worker does (Order.from_json); an order it
refuses is fine (that is what the parser is for), an order it accepts must render with
the native renderer and with the pure-Python reference, with no exception.  The same
fields are also given to both renderers directly, bypassing the parser (so lone
surrogates and whatever else the parser would refuse reach them too): there an
exception is allowed, a crash or a hang is not.  Whether the two renderers give the
same bytes is reported (`same`), not judged: that is tests/render/test_scripts.py's subject.

Used by tests/render/test_render_crash.py (a bounded run in the normal suite, and the
regression corpus tests/support/render_crash_corpus.json) and by `python -m bench.fuzz_render`
(the long run, which adds what it finds to the corpus).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "render_crash_corpus.json"
TEXT_FIELDS = ("event", "venue", "starts_at", "section", "row", "seat", "buyer", "price",
               "admission_code", "small_print")
PLAIN = {"event": "Carmen", "venue": "Opéra Bastille", "starts_at": "2026-12-15 19:30",
         "section": "Balkon", "row": "8", "seat": "12", "buyer": "Zoë Ødegaard",
         "price": "€ 89.00", "admission_code": "SD-00000042-01-3F9A1C",
         "small_print": "Valid for one admission."}
# how long one case may take in the child, both renderers, before it counts as a hang:
# the reference renders a 1000-character hostile small print in well under a second
HANG_SECONDS = 30.0
# REFERENCE_LIMITS: the reference renderer's bidi is python-bidi's legacy algorithm
# (bidi.algorithm), which predates the isolates of Unicode 6.3: an LRI, RLI, FSI or PDI
# fails its assertion "LRI not allowed here".  The native renderer (fribidi) handles
# them, and the worker uses the reference only where the extension is not built, so
# an exception there is that job's error (dead-lettered), not a crash: the fuzzer
# notes reference exceptions and fails only on crashes, hangs and native exceptions.


# -- the cases ----------------------------------------------------------------------------

def order_json(fields: dict[str, str], order_id: int = 1) -> str:
    """The order's JSON as the api would send it: ASCII, lone surrogates as escapes."""
    ticket = {**PLAIN, **fields}
    return json.dumps({"order_id": order_id, "tickets": [ticket]}, ensure_ascii=True)


def _blocks() -> list[tuple[int, int]]:
    from fontTools.unicodedata import Blocks

    ends = [*Blocks.RANGES[1:], 0x110000]
    return list(zip(Blocks.RANGES, [e - 1 for e in ends], strict=True))


BIDI_CONTROLS = "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
SPECIALS = ("\uffff", "\ufffe", "\ufffd", "\ufeff", "\x00", "\t", "\n", "\r", "\x85",
            "\u2028", "\u2029", "\u3000", "\u200b", "\u200c", "\u200d", "\u00ad", " ",
            "\ufe0f", "\ufe0e", "\U000e0100", "\u034f", "\u2060", "\u180e")
REGIONAL = [chr(c) for c in range(0x1F1E6, 0x1F200)]
TAG_LETTERS = [chr(c) for c in range(0xE0061, 0xE007B)]
SKIN_TONES = [chr(c) for c in range(0x1F3FB, 0x1F400)]
EMOJI = ("\U0001f469", "\U0001f468", "\U0001f467", "\U0001f466", "\u2764", "\U0001f525",
         "\U0001f3f3", "\U0001f3f4", "\u26a7", "\U0001f44d", "#", "1", "*", "\u20e3",
         "\U0001f9d1", "\U0001f91d", "\u2620")
MARKS = ("\u0300", "\u0301", "\u0308", "\u0327", "\u0345", "\u0e31", "\u0e48", "\u0e49",
         "\u0f71", "\u0f72", "\u0f80", "\u093f", "\u094d", "\u0bcd", "\u05b4", "\u0651",
         "\u0670", "\u1ab0", "\u1dc0", "\u20d0", "\u20dd", "\u0489", "\u102d", "\u1039",
         "\u17d2", "\u0eb4", "\u0ec8", "\u302a", "\u3099", "\U0001d165", "\U000e0020")
SCRIPT_SAMPLES = ("ภาษาไทยง่ายนิดเดียว", "नमस्ते क्षत्रिय", "السَّلَامُ عَلَيْكُمْ",
                  "שָׁלוֹם", "각한국어", "日本語のテキスト", "ខ្មែរ", "ພາສາລາວ",
                  "မြန်မာ", "བོད་ཡིག", "ܐܪܡܝܐ", "ދިވެހި", "ᠮᠣᠩᠭᠣᠯ", "ᏣᎳᎩ",
                  "ᐃᓄᒃᑎᑐᑦ", "ⵜⴰⵎⴰⵣⵉⵖⵜ", "ếỄỂỖ", "A\u0645B\u05d0(1)[2]")


def _in_block(pair: tuple[int, int]) -> st.SearchStrategy[str]:
    lo, hi = pair
    return st.integers(lo, hi).map(chr)


@st.composite
def _flag(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 5))
    return "".join(draw(st.sampled_from(REGIONAL)) for _ in range(n))


@st.composite
def _tag_sequence(draw: st.DrawFn) -> str:
    tags = draw(st.lists(st.sampled_from(TAG_LETTERS), max_size=8))
    end = draw(st.sampled_from(("\U000e007f", "", "\U000e007f\U000e007f")))
    return draw(st.sampled_from(("\U0001f3f4", "a", ""))) + "".join(tags) + end


@st.composite
def _zwj_sequence(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(EMOJI), min_size=1, max_size=6))
    tone = st.sampled_from(["", *SKIN_TONES, "\ufe0f"])
    return "\u200d".join(p + draw(tone) for p in parts)


@st.composite
def _cluster(draw: st.DrawFn) -> str:
    """A base and a long run of combining marks (a grapheme cluster a screen high)."""
    base = draw(st.sampled_from(("a", "\u0e01", "\u0915", "\u0628", "\u05d0", " ", "",
                                 "\u1000", "\u0f40", "\uac00")))
    n = draw(st.integers(1, 200))
    mark = draw(st.sampled_from(MARKS))
    mixed = draw(st.booleans())
    return base + "".join(draw(st.sampled_from(MARKS)) if mixed else mark for _ in range(n))


def pieces() -> st.SearchStrategy[str]:
    any_cp = st.integers(0, 0x10FFFF).map(chr)        # unassigned, private use, surrogates
    block = st.sampled_from(_blocks()).flatmap(_in_block)
    return st.one_of(
        any_cp, block, block, st.sampled_from(SPECIALS),
        st.sampled_from(BIDI_CONTROLS), _flag(), _tag_sequence(), _zwj_sequence(),
        _cluster(), st.sampled_from(SCRIPT_SAMPLES), st.sampled_from(SKIN_TONES),
        st.integers(0xE000, 0xF8FF).map(chr), st.integers(0xF0000, 0x10FFFD).map(chr),
        st.integers(0xD800, 0xDFFF).map(chr),
    )


def texts(limit: int = 200) -> st.SearchStrategy[str]:
    return st.lists(pieces(), max_size=40).map(lambda p: "".join(p)[:limit])


@st.composite
def orders(draw: st.DrawFn) -> str:
    """An order's JSON with hostile text in some of its fields."""
    fields: dict[str, str] = {}
    for name in draw(st.lists(st.sampled_from(TEXT_FIELDS), min_size=1, max_size=4,
                              unique=True)):
        fields[name] = draw(texts(1000 if name == "small_print" else 200))
    return order_json(fields)


# -- the child that renders ------------------------------------------------------------

def _render_both(order: Any) -> dict[str, Any]:
    from stagedoor import _render
    from stagedoor.render import reference

    out: dict[str, Any] = {}
    pdfs = []
    for name, fn in (("native", _render.render_order), ("reference", reference.render_order)):
        try:
            pdfs.append(fn(order))
        except Exception as e:  # reported to the parent, which judges it
            out[name] = f"{type(e).__name__}: {e}"[:300]
    if len(pdfs) == 2:
        out["same"] = pdfs[0] == pdfs[1]
    return out


def _direct_order(text: str) -> Any:
    """The order of `text` without the parser's checks (json allows lone surrogates)."""
    from stagedoor.render.order import Order, Ticket

    data = json.loads(text)
    t = data["tickets"][0]
    ticket = Ticket(order_id=1, **{k: str(t.get(k, "")) for k in TEXT_FIELDS})
    return Order(order_id=1, tickets=(ticket,))


def serve() -> None:
    """The child: one case a line on stdin ({"order": <order JSON text>}), one result a
    line on stdout ({"refused": reason|null, "parsed": {...}, "direct": {...}})."""
    from stagedoor.render.order import Order, OrderDataError

    for line in sys.stdin:
        case = json.loads(line)
        result: dict[str, Any] = {"refused": None}
        try:
            order = Order.from_json(case["order"].encode())
        except OrderDataError as e:
            result["refused"] = str(e)[:200]
        else:
            result["parsed"] = _render_both(order)
        result["direct"] = _render_both(_direct_order(case["order"]))
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


# -- the parent ---------------------------------------------------------------------------

@dataclasses.dataclass
class Failure:
    order: str          # the order's JSON text
    what: str           # "crash: SIGABRT", "hang", "error: native: ..."

    def entry(self) -> dict[str, str]:
        return {"order": self.order, "failure": self.what}


class RenderChild:
    """A child process rendering cases; respawned after a crash or a hang."""

    def __init__(self, hang_seconds: float = HANG_SECONDS, src: Path = ROOT / "src") -> None:
        self.hang_seconds = hang_seconds
        self.src = src          # the stagedoor to render with (another checkout's: --src)
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: IO[bytes] | None = None
        self.cases = 0
        self.different = 0      # parsed orders the two renderers gave different bytes
        self.reference_errors: dict[str, str] = {}     # message -> an order that raised it

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.src), str(ROOT),
                                             env.get("PYTHONPATH", "")])
        # stderr to a file, not a pipe: a child that writes much there never blocks
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in _stderr_tail)
        return subprocess.Popen(
            [sys.executable, "-c", "from tests.support.render_fuzz import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=env, cwd=ROOT)

    def _reap(self, kill: bool) -> int:
        """Wait for the child (killed first if `kill`), close its pipes; its status."""
        proc = self.proc
        assert proc is not None
        if kill:
            proc.kill()
        rc = proc.wait()
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        self.proc = None
        return rc

    def _stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        tail = self.stderr.read().decode(errors="replace")[-400:].strip()
        self.stderr.close()
        self.stderr = None
        return tail

    def render(self, order: str) -> tuple[dict[str, Any] | None, Failure | None]:
        """The child's result for one case, or the failure (crash, hang) it ended in."""
        if self.proc is not None and self.proc.poll() is not None:
            self._reap(kill=False)          # died between cases (it never does)
        if self.proc is None:
            self._stderr_tail()
            self.proc = self._spawn()
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        self.cases += 1
        try:
            proc.stdin.write((json.dumps({"order": order}) + "\n").encode())
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([proc.stdout], [], [], self.hang_seconds)
        line = proc.stdout.readline() if ready else b""
        if line:
            return json.loads(line), None
        if not ready:
            self._reap(kill=True)
            self._stderr_tail()
            return None, Failure(order, f"hang: no answer in {self.hang_seconds:g} s")
        rc = self._reap(kill=False)
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}"
        return None, Failure(order, f"crash: {how}: {self._stderr_tail()}")

    def check(self, order: str) -> Failure | None:
        """None when the case is handled: refused by the parser, or rendered by the
        native renderer without an exception, and no crash or hang in either renderer,
        with the parser or without.  An exception of the reference renderer is noted in
        `reference_errors` (by message), not failed: see REFERENCE_LIMITS above."""
        result, failure = self.render(order)
        if failure is not None:
            return failure
        assert result is not None
        parsed = result.get("parsed") or {}
        if "native" in parsed:
            return Failure(order, f"error: native: {parsed['native']}")
        if "reference" in parsed:
            key = parsed["reference"][:80]
            if key not in self.reference_errors:
                self.reference_errors[key] = order
        if "same" in parsed and not parsed["same"]:
            self.different += 1
        return None

    def close(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            self._reap(kill=self.proc.poll() is None)
        self._stderr_tail()


def fuzz(seconds: float, child: RenderChild, batch: int = 50) -> Iterator[Failure]:
    """Hypothesis-generated orders for `seconds`, in batches of `batch` (each a fresh
    hypothesis run, so one failure does not end the run); yields each failure, shrunk by
    hypothesis to a small input that still fails the same way."""
    from hypothesis import HealthCheck, Phase, given, settings

    stop = time.monotonic() + seconds
    found: list[Failure] = []
    while time.monotonic() < stop:
        found.clear()

        @settings(max_examples=batch, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck),
                  phases=(Phase.generate, Phase.shrink))
        @given(orders())
        def one(order: str) -> None:
            if time.monotonic() > stop + 120:       # a long shrink: give up on it
                return
            failure = child.check(order)
            if failure is not None:
                found[:] = [failure]
                raise AssertionError(failure.what)

        with contextlib.suppress(AssertionError):
            one()
        yield from list(found)


def load_corpus(path: Path = CORPUS) -> list[dict[str, str]]:
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


def add_to_corpus(failures: list[Failure], path: Path = CORPUS) -> int:
    """Append the failures' orders the corpus does not have yet; how many were new."""
    entries = load_corpus(path)
    known = {e["order"] for e in entries}
    new = [f.entry() for f in failures if f.order not in known]
    if new:
        path.write_text(json.dumps(entries + new, indent=1, ensure_ascii=True) + "\n",
                        encoding="utf-8")
    return len(new)
