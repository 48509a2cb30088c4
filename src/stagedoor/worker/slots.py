"""Slots: how many entries this worker may hold, reserved *before* a read.

The consume and reclaim paths together never hold more entries than there are free
slots: an entry that is read sits on this consumer's pending list, and one we cannot
start would age there for nothing.  A reservation becomes a running task (start) or
is given back (unreserve); wait_idle is the drain's and the isolation's barrier.
"""

from __future__ import annotations

import asyncio


class Slots:
    """At most `capacity` entries reserved or running; reservation happens before a read."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.reserved = 0
        self.running: dict[bytes, asyncio.Task[None]] = {}
        self._freed = asyncio.Event()

    @property
    def free(self) -> int:
        return self.capacity - self.reserved - len(self.running)

    async def reserve(self, n: int) -> int:
        while self.free <= 0:
            self._freed.clear()
            await self._freed.wait()
        k = min(n, self.free)
        self.reserved += k
        return k

    def try_reserve(self, n: int) -> int:
        # `free` spelled out: this runs for every read ahead (a property is a call)
        free = self.capacity - self.reserved - len(self.running)
        if free <= 0:
            return 0
        k = n if n < free else free
        self.reserved += k
        return k

    def unreserve(self, k: int) -> None:
        self.reserved -= k
        if k:
            self._freed.set()

    def start(self, entry_id: bytes, task: asyncio.Task[None]) -> None:
        self.reserved -= 1
        self.running[entry_id] = task
        task.add_done_callback(lambda _t: self._finish(entry_id))

    def _finish(self, entry_id: bytes) -> None:
        self.running.pop(entry_id, None)
        self._freed.set()

    async def wait_idle(self) -> None:
        while self.running:
            self._freed.clear()
            await self._freed.wait()
