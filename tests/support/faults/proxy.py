"""A TCP proxy on loopback between the worker and redis-server, with faults on demand.

Threads and blocking sockets: one accept thread, two pump threads per connection.
A rule matches a request by its command name (the first bulk string of the RESP
array, so a Lua body mentioning XACK does not match) and optionally by a word in the
request (b"BLOCK" tells the consumer's blocking read from the recovery read) and by
a word in the reply (b"outbox_id": only a reply that carries entries).  The request
is always forwarded, so Redis executes it; what happens to its reply is the fault:

    delay   hold the reply `seconds`, then send it (past the client's socket timeout
            the client has given up: a timeout with the command executed)
    drop    swallow the reply and close the connection (a lost reply)
    reset   swallow the reply and close with SO_LINGER 0 (an RST to the client)
    error   replace the reply by `error` (a RESP error line) and keep the connection
    blackhole  do NOT forward the request (nor anything after it on that connection):
            the command never reaches Redis, as when the process dies before its write

`times` bounds how often a rule fires; `hits` counts it.

A gate (`before(command, hook)`) acts between the commands of one pipeline: the next
request that holds `command` is split there, what comes before it is forwarded, then
`hook()` runs on the pump's thread, then the rest is forwarded.  Something can so
happen to the server between two commands a client sent in one write (a producer's
script and its WAIT: the master demoted in between).
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_COMMAND = re.compile(rb"^\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n")


@dataclass
class Rule:
    command: bytes
    action: str  # delay | drop | reset | error
    times: int = 1
    request_contains: bytes = b""
    reply_contains: bytes = b""
    seconds: float = 0.5
    error: bytes = b"-ERR injected by the test proxy\r\n"
    hits: int = 0

    def wants(self, request: bytes) -> bool:
        m = _COMMAND.match(request)
        return (self.hits < self.times and m is not None
                and m[1].upper() == self.command.upper()
                and self.request_contains in request)


@dataclass
class _Conn:
    client: socket.socket
    upstream: socket.socket
    armed: Rule | None = None
    blackhole: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class FaultProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.rules: list[Rule] = []
        self.gates: list[tuple[bytes, Callable[[], None]]] = []
        self.lock = threading.Lock()
        self.conns: list[_Conn] = []
        self.accepted = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True, name="proxy")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def add(self, rule: Rule) -> Rule:
        with self.lock:
            self.rules.append(rule)
        return rule

    def before(self, command: bytes, hook: Callable[[], None]) -> None:
        """Once: run hook() just before `command` (a whole command, by name) reaches the
        server, after everything the client sent before it in the same write."""
        with self.lock:
            self.gates.append((command.upper(), hook))

    def _gate(self, data: bytes) -> tuple[int, Callable[[], None]] | None:
        """(where the gated command starts in data, its hook), and the gate is spent."""
        with self.lock:
            for i, (command, hook) in enumerate(self.gates):
                m = re.search(rb"\*\d+\r\n\$%d\r\n%s\r\n" % (len(command), re.escape(command)),
                              data, re.IGNORECASE)
                if m is not None:
                    del self.gates[i]
                    return m.start(), hook
        return None

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.gates.clear()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        for c in list(self.conns):
            _close(c.client)
            _close(c.upstream)
        self._thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the pumps --------------------------------------------------------------------------
    def _accept(self) -> None:
        self._listener.settimeout(0.05)  # close() cannot wake a blocked accept()
        while not self._closed:
            try:
                client, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(client, upstream)
            with self.lock:
                self.conns.append(conn)
                self.accepted += 1
            threading.Thread(target=self._requests, args=(conn,), daemon=True).start()
            threading.Thread(target=self._replies, args=(conn,), daemon=True).start()

    def _requests(self, conn: _Conn) -> None:
        try:
            while True:
                data = conn.client.recv(65536)
                if not data:
                    break
                with self.lock:
                    rule = next((r for r in self.rules if r.wants(data)), None)
                    if rule is not None and rule.action == "blackhole":
                        rule.hits += 1
                        conn.blackhole = True
                if conn.blackhole:
                    continue
                with conn.lock:
                    conn.armed = rule
                gate = self._gate(data)
                if gate is not None:
                    at, hook = gate
                    conn.upstream.sendall(data[:at])
                    hook()
                    data = data[at:]
                conn.upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(conn.upstream)
            _close(conn.client)

    def _replies(self, conn: _Conn) -> None:
        try:
            while True:
                data = conn.upstream.recv(65536)
                if not data:
                    break
                with conn.lock:
                    rule, conn.armed = conn.armed, None
                if rule is not None and rule.reply_contains not in data:
                    with conn.lock:
                        conn.armed = rule  # not this reply: wait for one that matches
                    rule = None
                if rule is not None:
                    with self.lock:
                        fire = rule.hits < rule.times
                        if fire:
                            rule.hits += 1
                    if not fire:
                        rule = None
                if rule is None:
                    conn.client.sendall(data)
                elif rule.action == "delay":
                    time.sleep(rule.seconds)
                    conn.client.sendall(data)
                elif rule.action == "error":
                    conn.client.sendall(rule.error)
                elif rule.action == "drop":
                    break
                elif rule.action == "reset":
                    with contextlib.suppress(OSError):
                        conn.client.shutdown(socket.SHUT_RD)  # wakes our request pump
                    conn.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                    conn.client.close()  # linger 0: the peer gets an RST, not a FIN
                    break
                else:
                    raise ValueError(rule.action)
        except OSError:
            pass
        finally:
            _close(conn.client)
            _close(conn.upstream)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
