"""The shaped-text path of the pure-Python reference renderer (mirrors render/_native/).

Text the fast path (fastfont.py) cannot show, or that does not fit its box, is shaped
and drawn with glyphs of real fonts (see the module docstring of reference.py).  This
package does what fonts.pxi, glyphs.pxi, shape.pxi, clusters.pxi, layout.pxi, place.pxi
and type3.pxi do in C, step by step, but through *other* implementations where there is
one, so that the comparison in tests/render/test_render.py checks the native glue and not a
library against itself:

- shaping and outlines: the same system libharfbuzz, through ctypes (the issue asks
  for *the same* shaping: HarfBuzz builds differ, e.g. uharfbuzz's newer one
  substitutes the space between two Hangul syllables where Debian's 6.0 does not;
  shaping is HarfBuzz's job, what this module re-implements is everything around it);
- bidi: python-bidi's pure-Python UBA (bidi.algorithm) where the extension calls fribidi;
- scripts: fontTools.unicodedata where the extension asks HarfBuzz's Unicode functions;
- line breaks: libunibreak through ctypes, the same library (there is no other UAX #14
  implementation among the dependencies; the greedy wrap around it is re-implemented),
  and Thai word breaks from libthai through ctypes (the same dictionary segmenter; the
  Thai runs and their TIS-620 bytes are made here by Python's tis_620 codec), and
  Lao, Myanmar and Khmer word breaks from ICU's line break iterator through ctypes;
- outlines to PDF path operators, rounded as the C code rounds (float32, then half
  away from zero); codes, ToUnicode, fonts and layout: written again in Python.

Same face choice, glyph ids, positions, codes, layout decisions and PDF bytes: the tests
compare whole files.  Slow (milliseconds per field), which is fine for an oracle.

In the order of the data flow, each module beside the native unit it mirrors:

    libs.py     libharfbuzz, libunibreak, libthai, ICU through ctypes (harfbuzz.pxd,
                unibreak.pxd, thai.pxi, dictbreaks.pxi)
    faces.py    faces, the face of each character, glyph procs   (fonts.pxi, glyphs.pxi)
    para.py     one paragraph: scripts, bidi levels, shaped runs   (shape.pxi)
    layout.py   the order's glyph registry, a field's fit and wrap (clusters.pxi, layout.pxi)
    pdf.py      text operators, the order's Type 3 fonts, ToUnicode (place.pxi, type3.pxi)
    emoji.py    emoji sequences: the colour face's PNG as image XObjects (emoji.pxi)
"""
