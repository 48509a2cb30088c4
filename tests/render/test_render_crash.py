"""No text a buyer can type crashes or hangs either renderer (issue 25).

Every render here runs in a child process (tests/support/render_fuzz.py): an abort inside a C
library would otherwise kill pytest instead of failing the test.

- libunibreak, checked over every code point in a child: the library itself aborts on
  exactly the characters breaks.pxi names (the regional indicators, U+FFFF) and on no
  other; the guarded line_breaks on none, and it pairs regional indicators (LB30a);
- the hostile strings of the issue and of the corpus (tests/support/render_crash_corpus.json,
  where every failure the fuzzer ever found is kept) render in both renderers, with
  the same bytes;
- a bounded fuzz run: SD_FUZZ_SECONDS (default 30; 0 skips it) of hypothesis-generated
  orders, both renderers.  The long run is `python -m bench.fuzz_render --minutes 30`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from stagedoor.render.shaped import libs
from tests.support.render_fuzz import ROOT, RenderChild, fuzz, load_corpus, order_json

# 30 s for CI's time; longer runs: python -m bench.fuzz_render --minutes N
FUZZ_SECONDS = float(os.environ.get("SD_FUZZ_SECONDS", "30"))
ALLOW, NO = libs.LINEBREAK_ALLOWBREAK, libs.LINEBREAK_NOBREAK
JP = "\U0001F1EF\U0001F1F5"
FR = "\U0001F1EB\U0001F1F7"
ENGLAND = "\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F"
SCOTLAND = "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F"
HOSTILE = {
    "flag after a word (the issue)": "World Cup " + JP,
    "flag first": JP + " World Cup",
    "one regional indicator": "\U0001F1EF",
    "a regional indicator after a letter": "A\U0001F1EFB",
    "odd run of regional indicators": JP + FR + "\U0001F1E9",
    "flags without spaces, wrapped": (JP + FR) * 30,
    "U+FFFF first": "\uffff",
    "U+FFFF inside": "Carmen \uffff Bizet",
    "tag-sequence flags": f"Six Nations {ENGLAND} v {SCOTLAND}",
    "flag in right-to-left text": "كأس العالم " + JP + " نهائي",
}
# The other libraries at their limits (fribidi's explicit depth of 125 and its bracket
# stack of 63, HarfBuzz on a cluster of a thousand marks, libthai's dictionary on a run
# of Thai that is no words), cut to the field's limit: no abort, no hang, no exception.
# (Not byte-compared: the two renderers differ on a run of 999 Thai marks, a layout
# matter for the combining-mark bound, not a crash.)
LIMITS = {
    "embeddings past the depth limit": "\u202b" * 130 + "abc" + "\u202c" * 67,
    "brackets past the stack": "([{" * 150 + "\u05d0" + "}])" * 150,
    "a thousand marks": "a" + "\u0301" * 999,
    "Thai that is no words": "".join(chr(0x0E01 + (i * 7) % 0x2E) for i in range(1000)),
    "Thai marks on one consonant": "\u0e01" + "\u0e48" * 999,
}

_UNIBREAK_CHILD = r"""
import ctypes, sys
from stagedoor.render.shaped import libs
lib = libs._unibreak()
def raw(u):
    arr = (ctypes.c_uint32 * len(u))(*u)
    out = ctypes.create_string_buffer(len(u))
    lib.set_linebreaks_utf32(arr, ctypes.c_size_t(len(u)), None, out)
    return out.raw
hazards = set(range(0x1F1E6, 0x1F200)) | {0xFFFF}
if sys.argv[1] == "raw":
    # the library alone, every code point but the hazards: after another, and first
    cps = [c for c in range(0x110000) if c not in hazards]
    raw(cps)
    for c in cps:
        raw([c, 0x61])
elif sys.argv[1] == "guarded":
    # every code point after another (one call) and first
    every = list(range(0x110000))
    libs.line_breaks(every)
    for c in every:
        libs.line_breaks([c, 0x61])
else:
    raw([int(sys.argv[1], 16), 0x61] if sys.argv[2] == "first" else [0x61, int(sys.argv[1], 16)])
print("ok")
"""


def _unibreak_child(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    return subprocess.run([sys.executable, "-c", _UNIBREAK_CHILD, *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_libunibreak_aborts_on_exactly_the_guarded_characters() -> None:
    """Why breaks.pxi exists: the installed libunibreak itself aborts on a regional
    indicator and on U+FFFF (so the guard is not guarding against nothing)..."""
    for cp, where in (("1F1EF", "first"), ("1F1EF", "after"), ("FFFF", "after")):
        proc = _unibreak_child(cp, where)
        if proc.returncode == 0:
            pytest.skip(f"this libunibreak takes U+{cp} {where}: a release that knows RI")
        assert proc.returncode == -6, proc.stderr            # SIGABRT
        assert "Assertion" in proc.stderr
    # ... and on nothing else: every other code point, first and after any other
    proc = _unibreak_child("raw")
    assert proc.returncode == 0, proc.stderr[-500:]


def test_guarded_line_breaks_take_every_code_point() -> None:
    proc = _unibreak_child("guarded")
    assert proc.returncode == 0, proc.stderr[-500:]
    assert proc.stdout.strip() == "ok"


def _cps(s: str) -> list[int]:
    return [ord(c) for c in s]


def test_regional_indicators_pair_up_lb30a() -> None:
    """No break inside a flag, a break allowed between two flags (UAX #14 LB30a)."""
    brk = libs.line_breaks(_cps(JP + FR + "\U0001F1E9"))
    assert list(brk[:4]) == [NO, ALLOW, NO, ALLOW]
    brk = libs.line_breaks(_cps("a " + JP + " b"))
    assert brk[2] == NO                 # inside the flag
    brk = libs.line_breaks(_cps("\uffffab"))
    assert len(brk) == 3 and brk[2] == libs.LINEBREAK_MUSTBREAK


@pytest.fixture(scope="module")
def child() -> Iterator[RenderChild]:
    c = RenderChild()
    yield c
    c.close()


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("field", ["event", "buyer", "small_print"])
def test_hostile_text_renders_in_both_renderers(child: RenderChild, name: str,
                                                field: str) -> None:
    order = order_json({field: HOSTILE[name]})
    result, failure = child.render(order)
    assert failure is None, failure.what
    assert result is not None and result["refused"] is None
    assert result["parsed"] == {"same": True}, result       # no exception, same bytes


@pytest.mark.parametrize("name", sorted(LIMITS))
@pytest.mark.parametrize("field", ["event", "small_print"])
def test_library_limits_render_in_both_renderers(child: RenderChild, name: str,
                                                 field: str) -> None:
    order = order_json({field: LIMITS[name][:1000 if field == "small_print" else 200]})
    result, failure = child.render(order)
    assert failure is None, failure.what
    assert result is not None and result["refused"] is None
    assert set(result["parsed"]) == {"same"}, result         # no exception in either


@pytest.mark.parametrize("field", ["event", "small_print"])
def test_bidi_isolates_render_natively(child: RenderChild, field: str) -> None:
    """Isolates (LRI, RLI, FSI, PDI), nested past the depth limit and unmatched: the
    native renderer (fribidi) prints them; the reference raises (REFERENCE_LIMITS in
    tests/support/render_fuzz.py), which is that job's error, not a crash."""
    text = "\u2066\u2067" * 65 + "x\u05d0" + "\u2069" * 60 + "\u2068a"    # 194
    result, failure = child.render(order_json({field: text}))
    assert failure is None, failure.what
    assert result is not None and "native" not in result["parsed"], result
    assert "not allowed here" in result["parsed"]["reference"]


def test_corpus_of_past_failures(child: RenderChild) -> None:
    """Every failure the fuzzer ever found (tests/support/render_crash_corpus.json) stays fixed:
    no crash, no hang, no native exception, and the same bytes from both renderers."""
    corpus = load_corpus()
    assert corpus, "the corpus is empty"
    for entry in corpus:
        result, failure = child.render(entry["order"])
        assert failure is None, (failure.what, entry)
        assert result is not None
        assert result.get("parsed", {"same": True}) == {"same": True}, (result, entry)


@pytest.mark.skipif(FUZZ_SECONDS <= 0, reason="SD_FUZZ_SECONDS=0")
def test_fuzz_both_renderers_for_a_bounded_time(child: RenderChild) -> None:
    """SD_FUZZ_SECONDS of hostile orders; a failure names its (shrunk) order, which goes
    into tests/support/render_crash_corpus.json once fixed (bench/fuzz_render.py does it)."""
    failures = list(fuzz(FUZZ_SECONDS, child))
    assert child.cases > 0
    assert not failures, json.dumps([f.entry() for f in failures], indent=1)
