"""A worker's counters, kept in memory its supervisor shares.

A heartbeat carries a worker's counters every heartbeat_interval, so a worker that dies
between two (a poison job: SIGABRT, SIGKILL) took with it the count of every job it
handled, failed or dead-lettered since the last one; a worker that crashes within its
first interval had reported none ("handled": 0 in the status file of a pool where 241
jobs were handled).

So the supervisor maps one anonymous shared page (mmap, MAP_SHARED) per worker before
it forks it; each of the worker's counters (a Counter per name, by kind) writes every
new value through to the page (a ctypes store, no system call), and after the worker
died, however it died, the supervisor reads the page and takes, per counter and kind,
the larger of it and the last heartbeat.  Layout: MAX_SLOTS little-endian int64
values, then from byte HEADER the [name, kind] of each slot as JSON, written once at
boot: the series the worker declared then (every registered kind; per-entry counters
under kind "").  A series first seen later is counted by the heartbeats only.

No lock: one writer (the worker's loop thread); the reader looks after the writer is
dead, when a value can no longer change.
"""

from __future__ import annotations

import collections
import ctypes
import mmap
from collections.abc import Mapping
from typing import Any

import orjson

SIZE = 4096
HEADER = 2048           # the series' JSON starts here
MAX_SLOTS = HEADER // 8
Slots = ctypes.Array[ctypes.c_int64]


def make_page() -> mmap.mmap:
    """An anonymous shared page; made before the fork, so parent and child share it."""
    return mmap.mmap(-1, SIZE, flags=mmap.MAP_SHARED)


class SharedCounter(collections.Counter[str]):
    """A Counter whose values for the kinds in `index` are also stored in the page.

    On the hot path (a handled job: the C dispatch's `handled[kind] = ... + 1`): slots
    and a pre-bound dict.__setitem__ keep the store close to a plain Counter's."""

    __slots__ = ("_index", "_slots")

    def __init__(self, slots: Slots, index: dict[str, int],
                 initial: Mapping[str, int]) -> None:
        super().__init__()
        self._slots = slots
        self._index = index
        for kind, n in initial.items():
            self[kind] = n

    def __setitem__(self, kind: str, value: int,
                    _set: Any = dict.__setitem__) -> None:
        _set(self, kind, value)
        i = self._index.get(kind)
        if i is not None:
            self._slots[i] = value


def share(page: mmap.mmap, counters: dict[str, collections.Counter[str]]) -> None:
    """Replace each Counter in `counters` (name -> by kind) by a SharedCounter writing
    to `page`.  Call before anything takes a reference to one (the C dispatch does)."""
    series = sorted((name, kind) for name, by_kind in counters.items() for kind in by_kind)
    while series:
        blob = orjson.dumps(series[:MAX_SLOTS])
        if HEADER + len(blob) + 1 <= SIZE:
            break
        series = series[:len(series) // 2]  # too many long names: share the first ones
    series = series[:MAX_SLOTS]
    blob = orjson.dumps(series)
    page[HEADER:HEADER + len(blob) + 1] = blob + b"\0"
    slots = (ctypes.c_int64 * MAX_SLOTS).from_buffer(page)
    for name in list(counters):
        index = {kind: i for i, (n, kind) in enumerate(series) if n == name}
        counters[name] = SharedCounter(slots, index, counters[name])


def read_page(page: mmap.mmap) -> dict[str, dict[str, int]]:
    """name -> kind -> value, as the worker last stored them ({} before it shared)."""
    end = page.find(b"\0", HEADER)
    if end <= HEADER:
        return {}
    try:
        series = orjson.loads(page[HEADER:end])
    except orjson.JSONDecodeError:
        return {}
    slots = (ctypes.c_int64 * MAX_SLOTS).from_buffer_copy(page[:MAX_SLOTS * 8])
    out: dict[str, dict[str, int]] = {}
    for i, (name, kind) in enumerate(series):
        if slots[i] > 0:
            out.setdefault(str(name), {})[str(kind)] = int(slots[i])
    return out


def merge(stats: dict[str, Any], shared: dict[str, dict[str, int]]) -> None:
    """Raise the counters of a heartbeat snapshot to the shared page's values."""
    if not shared:
        return
    counters = stats.setdefault("counters", {})
    if not isinstance(counters, dict):
        return
    for name, by_kind in shared.items():
        row = counters.setdefault(name, {})
        if not isinstance(row, dict):
            continue
        for kind, n in by_kind.items():
            current = row.get(kind, 0)
            if not isinstance(current, int | float) or n > current:
                row[kind] = n
