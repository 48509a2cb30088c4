"""Where libthai finds its word-break dictionary (thbrk.tri), for Thai line wraps.

libthai (the native renderer links it; the reference renderer opens it through ctypes)
loads the dictionary on first use from $LIBTHAI_DICTDIR, else from the directory it was
compiled with (/usr/share/libthai: Debian's libthai-data).  Without one, th_brk_new
fails and a Thai field too long for its line wraps at a character cluster, mid-word.

The repaired wheel (scripts/build-wheel.sh) vendors libthai and carries the dictionary
too, at stagedoor/data/libthai/thbrk.tri, so a host without libthai-data still breaks
Thai at words.  `use_packaged()` points libthai at it, but only when neither the
variable nor the system directory has one: an operator's or the distribution's
dictionary wins.  Nothing else is imported here: stagedoor/__init__.py calls it.
"""

from __future__ import annotations

import os

NAME = "thbrk.tri"
SYSTEM_DIR = "/usr/share/libthai"
PACKAGED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "libthai")


def _has(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, NAME))


def use_packaged() -> None:
    """Set LIBTHAI_DICTDIR to the wheel's dictionary when libthai would find none."""
    if "LIBTHAI_DICTDIR" not in os.environ and not _has(SYSTEM_DIR) and _has(PACKAGED_DIR):
        os.environ["LIBTHAI_DICTDIR"] = PACKAGED_DIR


def location() -> tuple[str | None, str]:
    """(the dictionary file libthai will load or None, where it comes from)."""
    env = os.environ.get("LIBTHAI_DICTDIR")
    if env and _has(env):
        packaged = os.path.realpath(env) == os.path.realpath(PACKAGED_DIR)
        return os.path.join(env, NAME), "the wheel's copy" if packaged else "LIBTHAI_DICTDIR"
    if _has(SYSTEM_DIR):
        return os.path.join(SYSTEM_DIR, NAME), "libthai-data"
    return None, "none"
