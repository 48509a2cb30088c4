"""The directory fsync of durable writes, shared by the renames that land together.

A ticket PDF is durable when its bytes and its directory entry are on disk:

    write tmp -> fsync(tmp) -> rename(tmp, final) -> fsync(directory)

(files.write_atomic).  The directory fsync is the expensive half on ext4/xfs (it
waits for a journal commit) and it is per directory, not per file: one fsync of the
directory makes every rename that completed before it started durable.  So the
render threads share it (a group commit): a thread that renamed its file takes a
ticket; if no directory fsync is running it runs one, which covers every ticket taken
before it began; otherwise it waits for the next one to finish.  Under load one fsync
serves the renames that landed while the previous one ran (~0.4 fsyncs per file with
8 writers on the CI box); alone, a write costs exactly what the plain sequence costs.

Guarantee: `sync_after_rename` returns only once a directory fsync that *began after
the caller's rename* has completed.  A failed fsync raises in the thread that ran it
and covers nobody: the next waiter runs its own (and gets its own error), so a
failure is never reported as success.  The worker acks a job only after its handler
returned, so an acked render_tickets job's PDF survives a power loss (RELIABILITY.md;
tests/tickets/test_durable_order.py checks the order of the system calls).

Written by hand: the standard library has the calls, no library offers the sharing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DirectorySync(Protocol):
    """What files.write_atomic needs of a group commit: GroupSync, or _durable.DirSync
    (`native`: files.py may then hand it to the C write, which waits without the GIL)."""

    native: bool
    fsyncs: int

    def sync_after_rename(self) -> None: ...


class GroupSync:
    """Directory fsyncs of one directory, shared by the threads whose renames land together."""

    native = False

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cond = threading.Condition()
        self._renamed = 0     # tickets handed out: one per completed rename
        self._durable = 0     # every ticket <= this is covered by a finished fsync
        self._running = False
        self.fsyncs = 0       # how many directory fsyncs ran (tests, profiling)

    def sync_after_rename(self) -> None:
        """Call right after a rename completed; returns once a directory fsync that
        began after it has completed."""
        with self._cond:
            self._renamed += 1
            ticket = self._renamed
            while self._durable < ticket:
                if self._running:
                    self._cond.wait()
                    continue
                self._running = True
                covered = self._renamed  # every rename before this fsync starts
                self._cond.release()
                try:
                    fsync_dir(self.directory)
                except BaseException:
                    self._cond.acquire()
                    self._running = False
                    self._cond.notify_all()  # the next waiter tries its own fsync
                    raise
                self._cond.acquire()
                self._running = False
                self.fsyncs += 1
                self._durable = max(self._durable, covered)
                self._cond.notify_all()


try:  # the same protocol in C (_durable.DirSync), used by files.py's native write
    from ._durable import DirSync as _DirSync
except ImportError:  # the extension is not built: this module's GroupSync
    _DirSync = None  # type: ignore[assignment,misc]


class GroupSyncs:
    """One group commit per directory, made on first use (in the worker, after fork):
    the native DirSync when the extension is built (files.write_atomic then waits for
    it without the GIL), else GroupSync.  `native=False` forces GroupSync (tests)."""

    def __init__(self, native: bool = True) -> None:
        self._lock = threading.Lock()
        self._by_dir: dict[Path, DirectorySync] = {}
        self._make: Callable[[Path], DirectorySync] = (
            _DirSync if native and _DirSync is not None else GroupSync)

    def get(self, directory: Path) -> DirectorySync:
        with self._lock:
            sync = self._by_dir.get(directory)
            if sync is None:
                sync = self._by_dir[directory] = self._make(directory)
            return sync
