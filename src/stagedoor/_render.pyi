"""Types of the native renderer (stagedoor/_render.pyx)."""

from stagedoor.render.fonts import FontPlan
from stagedoor.render.order import Order

def render_order(order: Order) -> bytes:
    """PDF bytes, one page per ticket; the same bytes as stagedoor.render.reference.render_order."""

def qr_matrix(data: bytes) -> list[list[bool]]:
    """The QR symbol for `data` as rows of modules (True = dark), like render.qr.encode."""

def configure(plan: FontPlan) -> None:
    """Use this font plan (stagedoor.render.fonts) from now on; nothing is opened yet."""

def configure_fonts(faces: object, scripts: object, fallback: object,
                    han_default: object) -> None: ...

def thai_stats() -> dict[str, int]:
    """{"loaded": 1} once this process has loaded libthai's dictionary, else 0."""

def dictionary_breaks(text: str) -> list[int]:
    """Where ICU's Lao, Myanmar and Khmer dictionaries let a line break inside text."""

def configure_emoji(faces: object) -> None:
    """The colour emoji faces of the plan (FontPlan.emoji), tried in order."""

def emoji_face_path() -> str | None:
    """The file of the colour emoji face in use, None without one (the doctor)."""

def png_planes(data: bytes) -> tuple[int, int, bytes, bytes] | None:
    """(width, height, RGB, alpha) of a PNG as the colour glyph path decodes it."""

def missing_glyphs() -> int:
    """Characters drawn as replacement marks in this process so far (every thread)."""

def font_stats() -> dict[str, int]:
    """{"faces_open", "glyphs_cached", "missing_glyphs"} of this process."""

def face_covers(face: int, text: str) -> str:
    """The characters of text that face (a plan's face number) does not have."""

def language_index(tag: str) -> int:
    """The index of a BCP 47 tag's HarfBuzz language (0 for none)."""

def harfbuzz_version() -> str:
    """The version of the HarfBuzz library loaded."""

def font_faces(path: str) -> int:
    """How many faces a font file has (0: unreadable)."""

def face_unicodes(path: str, index: int) -> list[tuple[int, int]]:
    """The code point ranges of a face's cmap."""

def script_runs() -> list[tuple[int, int, str]]:
    """Runs of code points of one script (HarfBuzz's data), unassigned left out."""

class RenderPool:
    """`threads` C threads rendering orders into sinks (tickets/_durable.FileSink)
    without the GIL; an eventfd (`fd`) is readable when orders are done."""

    fd: int
    pending: int
    def __init__(self, threads: int) -> None: ...
    def submit(self, order: Order, sink: object, token: object) -> None: ...
    def collect(self) -> list[tuple[object, BaseException | None]]: ...
    def close(self) -> list[tuple[object, BaseException | None]]: ...
