"""Signals into the select loop: a handler only records the signal, a wakeup fd wakes
the loop, and the loop acts on the recorded signals in order (loop.py, _on_signal).

Nothing runs inside a signal handler but a deque append, so a signal can never land
in the middle of a fork, a respawn or a status write.
"""

from __future__ import annotations

import collections
import contextlib
import selectors
import signal
import socket
from typing import Any

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGTTIN,
           signal.SIGTTOU, signal.SIGCHLD)


class SignalInbox:
    """The supervisor's signals, queued; `pending` is drained by the loop."""

    def __init__(self) -> None:
        self.pending: collections.deque[int] = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._old_handlers: dict[int, Any] = {}

    def install(self, selector: selectors.BaseSelector) -> None:
        """Take over HANDLED; the selector reports ("wake", None) when one arrived."""
        for sock in (self._wake_r, self._wake_w):
            sock.setblocking(False)
        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        for sig in HANDLED:
            self._old_handlers[sig] = signal.signal(sig, self._record)
        selector.register(self._wake_r, selectors.EVENT_READ, ("wake", None))

    def _record(self, signum: int, _frame: Any) -> None:
        self.pending.append(signum)  # nothing else here: the loop acts on it

    def clear_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(512):
                pass

    def restore(self) -> None:
        """Give the signals back (at exit, and in a freshly forked child)."""
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)

    def close(self) -> None:
        self._wake_r.close()
        self._wake_w.close()
