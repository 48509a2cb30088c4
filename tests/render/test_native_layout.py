"""The native renderer's source keeps asyncpg's shape (issue 40 item 6): each C library
declared once, in its own render/_native/<lib>.pxd; every struct that more than one unit
uses in _render.pxd; a .pxi per concern.  Read as text: the rules are about where a
declaration is written, which the compiled extension no longer shows."""

from __future__ import annotations

import re

from tests.support.paths import PACKAGE

NATIVE = PACKAGE / "render" / "_native"
EXTERN = re.compile(r'^cdef extern from "([^"]+)"', re.MULTILINE)
STRUCT = re.compile(r"^cdef struct (\w+)", re.MULTILINE)


def units() -> dict[str, str]:
    """_render.pyx and every .pxi it includes, by file name: what one C module is made of
    besides its declarations."""
    files = [PACKAGE / "_render.pyx", *sorted(NATIVE.glob("*.pxi"))]
    return {f.name: f.read_text("utf-8") for f in files}


def library_headers() -> dict[str, list[str]]:
    """Header -> the .pxd files of render/_native that declare from it."""
    out: dict[str, list[str]] = {}
    for pxd in sorted(NATIVE.glob("*.pxd")):
        for header in EXTERN.findall(pxd.read_text("utf-8")):
            out.setdefault(header, []).append(pxd.name)
    return out


def test_each_library_header_is_declared_in_one_pxd() -> None:
    headers = library_headers()
    assert {"hb.h", "fribidi.h", "linebreak.h", "zlib.h"} <= set(headers)
    twice = {h: f for h, f in headers.items() if len(set(f)) > 1}
    assert not twice, f"a header declared in more than one .pxd: {twice}"


def test_no_unit_declares_a_library_of_its_own() -> None:
    """A library's functions come from its .pxd, cimported by _render.pxd; a .pxi (or the
    .pyx, or _render.pxd) that declares from a library header writes a second copy.  Inline
    C of one unit's own (`extern from *`) and the system calls of pool.pxi are not a
    library's."""
    others = {"*", "<sys/eventfd.h>", "<unistd.h>"}
    found = {name: [h for h in EXTERN.findall(text) if h not in others]
             for name, text in {**units(), "_render.pxd":
                                (PACKAGE / "_render.pxd").read_text("utf-8")}.items()}
    found = {name: h for name, h in found.items() if h}
    assert not found, f"C library declarations outside render/_native/*.pxd: {found}"


def test_every_shared_struct_is_in_render_pxd() -> None:
    """A struct a .pxi declares is used by that .pxi alone; one two units use is in
    _render.pxd (the structs the renderer passes around)."""
    texts = units()
    shared = {}
    for name, text in texts.items():
        for struct in STRUCT.findall(text):
            users = [other for other, t in texts.items()
                     if other != name and re.search(rf"\b{struct}\b", t)]
            if users:
                shared[f"{name}: {struct}"] = users
    assert not shared, f"structs used beyond the unit that declares them: {shared}"


def test_the_native_units_exist_where_the_index_says() -> None:
    # put_glyph is where a reader opens for "where is a glyph placed"
    assert "cdef void put_glyph(" in (NATIVE / "place.pxi").read_text("utf-8")
    assert "cdef int boundary(" in (NATIVE / "clusters.pxi").read_text("utf-8")
    assert "cdef int layout_field(" in (NATIVE / "layout.pxi").read_text("utf-8")

