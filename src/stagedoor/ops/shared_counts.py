"""The `handled` counters of a worker, kept in memory its supervisor shares.

A heartbeat carries a worker's counters every heartbeat_interval, so a worker that dies
between two (a poison job: SIGABRT, SIGKILL) took with it the count of every job it
handled since the last one; a worker that crashes within its first interval had
reported none ("handled": 0 in the status file of a pool where 241 jobs were handled).

So the supervisor maps one anonymous shared page (mmap, MAP_SHARED) per worker before
it forks it; the worker's `handled` Counter writes each new value through to the page
(a ctypes store, no system call), and after the worker died, however it died, the
supervisor reads the page and takes, per kind, the larger of it and the last
heartbeat.  Layout: 255 little-endian int64 counts, one per kind, then from byte
HEADER the kinds as a JSON list (index = slot in the counts), written once at boot.

No lock: one writer (the worker's loop thread), the reader looks only after the
writer is dead, or takes a value at most one job old.
"""

from __future__ import annotations

import collections
import ctypes
import mmap
from collections.abc import Iterable

import orjson

SIZE = 4096
HEADER = 2048           # the kinds' JSON starts here
MAX_KINDS = HEADER // 8 - 1


def make_page() -> mmap.mmap:
    """An anonymous shared page; made before the fork, so parent and child share it."""
    return mmap.mmap(-1, SIZE, flags=mmap.MAP_SHARED)


class SharedCounter(collections.Counter[str]):
    """A Counter whose values for known kinds are also stored in the shared page."""

    def __init__(self, page: mmap.mmap, kinds: Iterable[str],
                 initial: collections.Counter[str]) -> None:
        super().__init__()
        names = sorted(kinds)[:MAX_KINDS]
        blob = orjson.dumps(names)
        if HEADER + len(blob) + 1 > SIZE:  # too many long names: count the first ones
            names, blob = [], b"[]"
        page[HEADER:HEADER + len(blob) + 1] = blob + b"\0"
        self._page = page  # keeps the mapping alive as long as the array
        self._slots = (ctypes.c_int64 * MAX_KINDS).from_buffer(page)
        self._index = {name: i for i, name in enumerate(names)}
        for kind, n in initial.items():
            self[kind] = n

    def __setitem__(self, kind: str, value: int) -> None:
        super().__setitem__(kind, value)
        i = self._index.get(kind)
        if i is not None:
            self._slots[i] = value

    def __reduce__(self) -> tuple[type, tuple[dict[str, int]]]:  # copies are plain
        return collections.Counter, (dict(self),)


def read_page(page: mmap.mmap) -> dict[str, int]:
    """kind -> handled, as the worker last stored it ({} if it never wrote the kinds)."""
    end = page.find(b"\0", HEADER)
    if end <= HEADER:
        return {}
    try:
        names = orjson.loads(page[HEADER:end])
    except orjson.JSONDecodeError:
        return {}
    slots = (ctypes.c_int64 * MAX_KINDS).from_buffer_copy(page[:MAX_KINDS * 8])
    return {str(name): int(slots[i]) for i, name in enumerate(names) if slots[i] > 0}


def merge_handled(stats: dict[str, object], shared: dict[str, int]) -> None:
    """Raise the `handled` counters of a heartbeat snapshot to the shared page's values."""
    if not shared:
        return
    counters = stats.setdefault("counters", {})
    if not isinstance(counters, dict):
        return
    handled = counters.setdefault("handled", {})
    if not isinstance(handled, dict):
        return
    for kind, n in shared.items():
        current = handled.get(kind, 0)
        if not isinstance(current, int | float) or n > current:
            handled[kind] = n
