"""Text for the operator, in the terminal and on the console's page: whatever came off
the stream, escaped before it is shown (dead, pending, job, pause, status and the web
print it), and durations as people read them."""

from __future__ import annotations

import math


def safe(text: str, keep: str = "") -> str:
    """The text with every control and format character escaped (\\x1b, \\u202e),
    but those in `keep` (the web page keeps newlines and tabs: HTML shows them as space).

    A dead letter holds whatever was on the stream; printed raw, an escape sequence
    in it is a command to the operator's terminal (retitle, clear, recolour, or an
    OSC 52 clipboard write), and a direction override reorders what is shown after it
    (4471\\u202e0988 reads 44718890).  --json is left as it is: JSON escapes these itself."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def short(text: str | None, width: int) -> str:
    """A listing cell: escaped, one line, at most `width` characters."""
    text = safe(text or "-")
    return text if len(text) <= width else text[: width - 3] + "..."


def human_ms(ms: float | None) -> str:
    """850 -> '850ms', 4200 -> '4.2s', 192000 -> '3m12s', 7380000 -> '2h03m'."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms:.0f}ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    if s < 86400:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d{int(s % 86400 // 3600):02d}h"


def seconds_text(s: float | None) -> str:
    """0.00042 -> '420 µs', 0.0123 -> '12.3 ms', 2.5 -> '2.50 s', 125 -> '2m05s'."""
    if s is None or not math.isfinite(s):
        return "-"
    if s < 0.001:
        return f"{s * 1e6:.0f} \u00b5s"
    if s < 1:
        return f"{s * 1000:.3g} ms"
    if s < 60:
        return f"{s:.2f} s"
    return f"{int(s // 60)}m{int(s % 60):02d}s"
