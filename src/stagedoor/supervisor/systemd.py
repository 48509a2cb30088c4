"""sd_notify by hand: one AF_UNIX datagram per message, no libsystemd.

systemd passes the socket's address in NOTIFY_SOCKET: a path, or "@name" for an
abstract socket (the leading "@" stands for a NUL byte).  A message is newline
separated VAR=value lines (READY=1, STATUS=..., WATCHDOG=1, STOPPING=1,
RELOADING=1).  With NotifyAccess=main only the main process may talk to systemd, so
the supervisor reads and *unsets* NOTIFY_SOCKET / WATCHDOG_* before it forks: a
worker cannot notify by accident.

The watchdog: systemd sets WATCHDOG_USEC (and WATCHDOG_PID, the pid it is meant
for); the service must send WATCHDOG=1 more often than that.  We ping at half the
interval, as sd_watchdog_enabled(3) recommends.

Sending never raises and never blocks: the socket is non-blocking, a full queue or a
vanished socket drops the message and logs once.  Notifications are advisory; the
supervisor must keep its workers running even when systemd is not listening.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping, MutableMapping

log = logging.getLogger("stagedoor.systemd")

NOTIFY_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def socket_address(value: str) -> str | bytes:
    """NOTIFY_SOCKET -> an address for sendto: '@name' is abstract, '/path' a file."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    raise ValueError(f"NOTIFY_SOCKET={value!r}: expected an absolute path or @abstract name")


def watchdog_interval(environ: Mapping[str, str], pid: int | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WATCHDOG_USEC), or None when off.

    WATCHDOG_PID, when set, must be our pid: otherwise the watchdog is meant for
    another process (a parent that exec'd us without clearing it)."""
    raw = environ.get("WATCHDOG_USEC", "")
    if not raw:
        return None
    try:
        usec = int(raw)
    except ValueError:
        log.warning("ignoring WATCHDOG_USEC=%r: not an integer", raw)
        return None
    if usec <= 0:
        return None
    wpid = environ.get("WATCHDOG_PID", "")
    if wpid:
        try:
            if int(wpid) != (os.getpid() if pid is None else pid):
                return None
        except ValueError:
            return None
    return usec / 1_000_000 / 2


class Notifier:
    """A connection-less sender to systemd's notify socket (a no-op when there is none)."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self._target: str | bytes | None = None
        self._sock: socket.socket | None = None
        self._warned = False
        if address:
            self._target = socket_address(address)
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)

    @classmethod
    def from_environ(cls, environ: MutableMapping[str, str], *, unset: bool = True
                     ) -> tuple[Notifier, float | None]:
        """The notifier and watchdog interval of this process; unsets the variables so
        that nothing forked or exec'd later inherits them."""
        address = environ.get("NOTIFY_SOCKET") or None
        interval = watchdog_interval(environ)
        if unset:
            for name in NOTIFY_ENV:
                environ.pop(name, None)
        try:
            return cls(address), interval
        except ValueError as e:
            log.warning("%s; not notifying systemd", e)
            return cls(None), None

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def fileno(self) -> int:
        return -1 if self._sock is None else self._sock.fileno()

    def send(self, *lines: str) -> bool:
        """Send 'VAR=value' lines as one datagram. True if it was handed to the kernel."""
        if self._sock is None or self._target is None:
            return False
        data = "\n".join(line.replace("\n", " ") for line in lines).encode()
        try:
            self._sock.sendto(data, self._target)
            return True
        except OSError as e:
            if not self._warned:
                log.warning("sd_notify to %s failed (%s); continuing without it",
                            self.address, e)
                self._warned = True
            return False

    def ready(self, status: str | None = None) -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def extend_timeout(self, seconds: float, status: str | None = None) -> bool:
        """EXTEND_TIMEOUT_USEC: the start (or stop) timeout of a Type=notify unit is
        pushed to now + seconds, so a wait that is not a hang is not killed."""
        return self.send(f"EXTEND_TIMEOUT_USEC={int(seconds * 1_000_000)}",
                         *([f"STATUS={status}"] if status else []))

    def stopping(self, status: str | None = None) -> bool:
        return self.send("STOPPING=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> bool:
        # systemd >= 253 wants MONOTONIC_USEC with RELOADING=1 (Type=notify-reload);
        # older versions ignore the extra line.
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
