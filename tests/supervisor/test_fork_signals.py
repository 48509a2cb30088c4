"""supervisor/process.py: a signal sent to a worker as it is forked waits for the
worker's own handlers; it is never taken by the supervisor's handlers the child
inherited (CI, 2026-12-05: a worker retired as it was forked booted, ran jobs for
graceful_timeout and was SIGKILLed, and its jobs ran twice)."""

from __future__ import annotations

import os
import selectors
import signal
import time

from stagedoor.supervisor.process import Process
from stagedoor.supervisor.signals import SignalInbox


def test_a_sigterm_sent_as_a_worker_is_forked_waits_for_its_own_handler() -> None:
    selector = selectors.DefaultSelector()
    inbox = SignalInbox()
    inbox.install(selector)
    try:
        def in_child() -> None:
            # The window between fork and the child giving the supervisor's handlers
            # back, made long enough for the signal to land in it.
            time.sleep(0.5)
            inbox.restore()

        def child(_hb_w: int, _life_r: int) -> int:
            # Still pending (blocked until the worker's own stop handler is in), not
            # taken by the supervisor's handler: exit 0.
            return 0 if signal.SIGTERM in signal.sigpending() else 3

        proc = Process.fork(child, in_child=in_child)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait() == 0, "the SIGTERM went to the supervisor's handler in the child"
        proc.close()
        assert signal.SIGTERM not in inbox.pending  # nor was it the supervisor's own
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()  # the parent's mask
    finally:
        inbox.restore()
        inbox.close()
        selector.close()
