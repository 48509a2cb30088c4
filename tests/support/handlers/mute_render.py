"""A render process that never says it is ready (a start stuck in its imports, or in a
font directory on a dead network mount), for the boot-wait tests:

    monkeypatch.setattr(render_host, "SERVE_MODULE", mute_render.SERVE)

Run as the render process (`python -m tests.support.handlers.mute_render FD PARENT_PID`),
it reads its socket until the worker closes it, and exits; the kernel kills it if the
worker dies (as render_serve.die_with)."""

from __future__ import annotations

import socket
import sys

from stagedoor.tickets.render_serve import die_with

SERVE = "tests.support.handlers.mute_render"


def main(argv: list[str]) -> int:
    fd, parent = int(argv[0]), int(argv[1])
    die_with(parent)
    sock = socket.socket(fileno=fd)
    while sock.recv(65536):     # the handshake, then nothing: EOF when the worker closes
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
