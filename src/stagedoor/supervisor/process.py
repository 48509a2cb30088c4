"""One forked child and the OS calls around it: fork, pipes, pidfd, signals, reaping.

No policy lives here (that is loop.py and decisions.py); this module only knows how to start a
child with two pipes and how to ask the kernel about it:

    heartbeat pipe   child writes, supervisor reads (non-blocking, in the selector)
    lifeline pipe    supervisor holds the only write end and writes only one-byte
                     requests (`ask`: "q" for fresh queue numbers); when the
                     supervisor dies the kernel closes it and the child reads EOF
    pidfd            readable when the child exits (Linux >= 5.3); signals sent
                     through it cannot hit a recycled pid.  Without pidfd_open we
                     fall back to waitpid(WNOHANG) polling on every loop tick.

The child closes every descriptor it inherited except stdio and its own two pipe
ends, so one worker never holds another worker's lifeline (which would keep it
alive after the supervisor died) or the supervisor's sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterable

from ..errors import StagedoorError
from ..exitcodes import EX_SOFTWARE

USE_PIDFD = not os.environ.get("_STAGEDOOR_NO_PIDFD")  # tests force the fallback with it


def close_fds_except(keep: Iterable[int]) -> None:
    """Close every descriptor >= 3 that is not in `keep`."""
    lo = 3
    for fd in sorted(set(k for k in keep if k >= 3)):
        if fd > lo:
            os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, _max_fd())


def _max_fd() -> int:
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return os.sysconf("SC_OPEN_MAX")


def describe_status(code: int | None) -> str:
    """A returncode as words: 'exit 78' or 'signal SIGKILL'."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


class ForkUnsafe(StagedoorError, RuntimeError):
    """A thread or an event loop exists in the supervisor: forking would copy it."""


def assert_fork_safe() -> None:
    if threading.active_count() != 1:
        names = ", ".join(t.name for t in threading.enumerate())
        raise ForkUnsafe(f"refusing to fork: the supervisor has threads ({names})")
    if asyncio.events._get_running_loop() is not None:
        raise ForkUnsafe("refusing to fork: an asyncio loop is running in the supervisor")


class Process:
    """A forked child: its pid, the read end of its heartbeat pipe, its lifeline, pidfd."""

    def __init__(self, pid: int, heartbeat_fd: int, lifeline_fd: int, pidfd: int | None) -> None:
        self.pid = pid
        self.heartbeat_fd = heartbeat_fd
        self.lifeline_fd = lifeline_fd
        self.pidfd = pidfd
        self.returncode: int | None = None

    @classmethod
    def fork(cls, child: Callable[[int, int], int], *,
             in_child: Callable[[], None] = lambda: None) -> Process:
        """Fork; the child runs in_child() (close the parent's objects), then
        child(heartbeat_write_fd, lifeline_read_fd) and _exits with its return value."""
        hb_r, hb_w = os.pipe()
        life_r, life_w = os.pipe()
        # Every signal is blocked across the fork.  A signal that reached the new child
        # before in_child() gave the supervisor's handlers back ran the supervisor's
        # handler there and was lost: a SIGTERM that retired a worker as it was forked
        # (SIGTTIN then SIGTTOU) left it to boot and run jobs until the SIGKILL of
        # graceful_timeout, and those jobs ran twice (CI, 2026-12-05).  Blocked, it waits
        # in the child until the handlers are its own; SIGTERM stays blocked until the
        # worker's own stop handler is in (worker/child.py), so a stop at any moment of
        # a boot is the graceful one.
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            for fd in (hb_r, hb_w, life_r, life_w):
                os.close(fd)
            raise
        if pid == 0:  # pragma: no cover - runs in the child, reported via its exit code
            code = EX_SOFTWARE
            try:
                os.close(hb_r)
                os.close(life_w)
                in_child()
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask | {signal.SIGTERM})
                close_fds_except((hb_w, life_r))
                code = child(hb_w, life_r)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = EX_SOFTWARE
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        os.close(hb_w)
        os.close(life_r)
        os.set_blocking(hb_r, False)
        pidfd: int | None = None
        if USE_PIDFD and hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                pidfd = None
        return cls(pid, hb_r, life_w, pidfd)

    # -- asking the kernel --------------------------------------------------------------
    def poll(self) -> int | None:
        """Reap if it exited: None while running, else the returncode (-N for signal N)."""
        if self.returncode is not None:
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.returncode = -255  # reaped elsewhere; should not happen
            return self.returncode
        if pid == 0:
            return None
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        """Block until it exits (only for the final reap after SIGKILL)."""
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                self.returncode = -255
        return self.returncode

    def send_signal(self, sig: int) -> bool:
        """Signal it unless it was reaped already; through the pidfd when there is one."""
        if self.returncode is not None:
            return False
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, sig)
            else:
                os.kill(self.pid, sig)
            return True
        except ProcessLookupError:
            return False

    def read_heartbeats(self, limit: int = 1 << 16) -> bytes | None:
        """What the child wrote so far; b'' when nothing is there, None at EOF."""
        if self.heartbeat_fd < 0:
            return None
        try:
            data = os.read(self.heartbeat_fd, limit)
        except BlockingIOError:
            return b""
        return data or None

    def ask(self, request: bytes) -> bool:
        """Write a one-byte request down the lifeline ("q": fresh queue numbers, please).

        Never blocks: a child that does not read (hung, or gone) just misses the
        request.  Returns whether it was written."""
        if self.lifeline_fd < 0:
            return False
        try:
            os.set_blocking(self.lifeline_fd, False)
            return os.write(self.lifeline_fd, request) == len(request)
        except (BlockingIOError, BrokenPipeError):
            return False

    # -- descriptors ----------------------------------------------------------------------
    def fds(self) -> list[int]:
        return [fd for fd in (self.heartbeat_fd, self.lifeline_fd, self.pidfd or -1) if fd >= 0]

    def close_heartbeat(self) -> None:
        if self.heartbeat_fd >= 0:
            os.close(self.heartbeat_fd)
            self.heartbeat_fd = -1

    def close(self) -> None:
        """Close our ends (after reaping; closing the lifeline early tells it to stop)."""
        self.close_heartbeat()
        if self.lifeline_fd >= 0:
            os.close(self.lifeline_fd)
            self.lifeline_fd = -1
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
