"""Renders that abort or never end, for the render-isolation tests: the faults a native
renderer can have (a C library's failed assertion; a loop that does not terminate),
brought in by the tests, not by the product.

    --handlers tests.support.handlers.faulty_worker:registry
                            (a worker: stagedoor work / supervise)
    monkeypatch.setattr(render_host, "SERVE_MODULE", faulty_render.SERVE)  (a RenderHost)

Importing this module changes nothing; install() (tests/support/handlers/faulty_worker.py,
imported by a worker through its handlers setting) makes the worker's render process run this module
instead of stagedoor.tickets.render_serve, and the worker's own LocalRender faulty
(render_isolation = "none").  Run as the render process (`python -m
tests.support.handlers.faulty_render FD PARENT_PID`), it makes LocalRender faulty there,
then serves as render_serve does.

Faulty: an order whose text (its repr) contains ABORT aborts the process where its
render starts (os.abort: SIGABRT); one that contains HANG never ends.  Every other
order renders as usual, on the native pool's fast path.  A HANG burns CPU in a thread
of its own while it waits, as a native render stuck in a loop does: a process that uses
no CPU is not running, and render_host does not blame its render
(stagedoor/tickets/runstate.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path

from stagedoor.render.order import Order
from stagedoor.tickets import render_host, render_serve
from stagedoor.tickets.render_pool import LocalRender, Written

ABORT = "ABORT-IN-RENDER-7d1c"
HANG = "HANG-IN-RENDER-5e0b"
SERVE = "tests.support.handlers.faulty_render"

_submit = LocalRender.submit
_render_into = LocalRender.render_into


def _spin() -> None:
    while True:
        time.sleep(0)   # CPU time, mostly the kernel's, without holding the GIL


def _faulty(order: Order) -> bool:
    text = repr(order)
    return ABORT in text or HANG in text


def submit(self: LocalRender, order: Order, directory: bytes, name: bytes,
           done: Written) -> bool:
    if _faulty(order):
        return False    # through render_into, where the fault happens
    return _submit(self, order, directory, name, done)


async def render_into(self: LocalRender, order: Order, directory: bytes, name: bytes,
                      path: Path | None = None) -> dict[str, int]:
    text = repr(order)
    if ABORT in text:
        os.abort()
    if HANG in text:
        threading.Thread(target=_spin, daemon=True).start()
        await asyncio.Event().wait()
    return await _render_into(self, order, directory, name, path)


def install() -> None:
    """LocalRender faulty in this process; its render processes run this module."""
    LocalRender.submit = submit  # type: ignore[method-assign]
    LocalRender.render_into = render_into  # type: ignore[method-assign]
    render_host.SERVE_MODULE = SERVE


if __name__ == "__main__":
    install()
    sys.exit(render_serve.main(sys.argv[1:]))
