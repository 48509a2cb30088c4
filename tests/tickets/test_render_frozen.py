"""A frozen render process is a stall, not a hang (issue 37 item 4, beyond SIGSTOP).

A cgroup freezer (`docker pause`, systemd freezing a unit, cgroup v2 `cgroup.freeze`)
keeps a process from running without the T state SIGSTOP shows; runstate.py reads the
cgroup, and the CPU time the process used, before render_host.py blames an order.

Real processes in real cgroups: a child cgroup of the v2 hierarchy (and of the v1
freezer where it is mounted) that the test creates, freezes and removes.  Where the
cgroup file systems are not writable (not root, no cgroup v2) the tests are skipped,
and say so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.telemetry.metrics import WorkerStats
from stagedoor.tickets import runstate
from stagedoor.tickets.render_host import RenderHost
from tests.support.worker import gone, poll

SRC = Path(__file__).resolve().parents[2] / "src"


def _mount(fstype: str, option: str | None = None) -> Path | None:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            after = right.split()
            if after and after[0] == fstype and (
                    option is None or option in after[2].split(",")):
                return Path(left.split()[4])
    return None


class _Cgroup:
    """A child cgroup the test made: move processes in, freeze and thaw it."""

    def __init__(self, path: Path, v2: bool) -> None:
        self.path, self.v2 = path, v2

    def add(self, pid: int) -> None:
        (self.path / ("cgroup.procs" if self.v2 else "tasks")).write_text(str(pid))

    def freeze(self, on: bool) -> None:
        if self.v2:
            (self.path / "cgroup.freeze").write_text("1" if on else "0")
            poll(lambda: f"frozen {int(on)}" in (self.path / "cgroup.events").read_text(),
                 what="the cgroup frozen" if on else "the cgroup thawed")
        else:
            (self.path / "freezer.state").write_text("FROZEN" if on else "THAWED")


def _make(root: Path | None, v2: bool) -> Iterator[_Cgroup]:
    if root is None or os.geteuid() != 0:
        pytest.skip("no writable cgroup hierarchy here (needs root and a cgroup mount)")
    path = root / f"stagedoor-test-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir()
    except OSError as e:
        pytest.skip(f"cannot create a cgroup under {root}: {e}")
    group = _Cgroup(path, v2)
    try:
        yield group
    finally:
        group.freeze(False)
        procs = path / ("cgroup.procs" if v2 else "tasks")
        for pid in procs.read_text().split():   # back where the test process is
            (root / procs.name).write_text(pid)
        path.rmdir()


@pytest.fixture
def cgroup2() -> Iterator[_Cgroup]:
    yield from _make(_mount("cgroup2"), True)


@pytest.fixture
def freezer1() -> Iterator[_Cgroup]:
    yield from _make(_mount("cgroup", "freezer"), False)


def test_runstate_tells_running_stopped_and_idle() -> None:
    """On real processes: one that spins ran; one that sleeps used no CPU (idle); a
    SIGSTOPped one is stopped; one that is gone cannot be told about."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleep = subprocess.Popen(["sleep", "60"])
    try:
        before = runstate.cpu_ticks(spin.pid)
        poll(lambda: runstate.cpu_ticks(spin.pid) != before, what="the spinner used CPU")
        ticks = runstate.cpu_ticks(spin.pid)
        assert ticks is not None and runstate.not_running(spin.pid, ticks - 1) is None
        idle = runstate.cpu_ticks(sleep.pid)
        time.sleep(0.1)
        assert runstate.not_running(sleep.pid, idle) == "idle"
        os.kill(spin.pid, signal.SIGSTOP)
        poll(lambda: runstate.stopped(spin.pid), what="the spinner stopped")
        assert runstate.not_running(spin.pid, None) == "stopped"
        os.kill(spin.pid, signal.SIGCONT)
    finally:
        for p in (spin, sleep):
            p.kill()
            p.wait()
    assert runstate.not_running(spin.pid, 0) is None     # gone: cannot tell
    assert not runstate.frozen(spin.pid)


def test_runstate_tells_frozen_in_a_v2_or_v1_cgroup(cgroup2: _Cgroup,
                                                     freezer1: _Cgroup) -> None:
    """A process in a frozen cgroup, v2 or v1, is frozen although its state is S or D,
    not T: only the cgroup tells."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for group in (cgroup2, freezer1):
            group.add(spin.pid)
            assert not runstate.frozen(spin.pid)
            group.freeze(True)
            poll(lambda: runstate.frozen(spin.pid), what="the freeze seen")
            assert not runstate.stopped(spin.pid)
            assert runstate.not_running(spin.pid, None) == "frozen"
            group.freeze(False)
            poll(lambda: not runstate.frozen(spin.pid), what="the thaw seen")
    finally:
        spin.kill()
        spin.wait()


async def test_a_frozen_render_process_is_a_stall_not_a_verdict(
        tmp_path: Path, cgroup2: _Cgroup) -> None:
    """Freeze the render process's cgroup (as `systemd freeze` or `docker pause` would),
    then render one order with a short render_timeout: the process is found with no
    result, but it was frozen (state S, not T), so no order is blamed: a fresh process
    renders it alone, and nothing counts as a hang."""
    stats = WorkerStats(["render_tickets"])
    host = RenderHost(Settings(render_timeout=1.0), stats)
    try:
        await host.render_to(1, demo_order(1).to_json(), tmp_path / "order-1.pdf")
        first = host.pid
        assert first is not None
        cgroup2.add(first)
        cgroup2.freeze(True)
        await host.render_to(2, demo_order(2).to_json(), tmp_path / "order-2.pdf")
        assert (tmp_path / "order-2.pdf").read_bytes().startswith(b"%PDF-")
        assert host.pid is not None and host.pid != first
        poll(lambda: gone([first]), what="the frozen process killed")
        assert stats.counters["render_hangs"].get("render_tickets", 0) == 0
    finally:
        await host.close()


async def test_a_render_process_in_a_frozen_v1_cgroup_does_not_hold_the_next_one(
        tmp_path: Path, freezer1: _Cgroup) -> None:
    """The cgroup v1 freezer (`docker pause` on a v1 host) holds a SIGKILL until the
    thaw: the process cannot die.  Found frozen, it is killed and left to die when
    thawed; the order is rendered alone by a fresh process meanwhile, not blamed, and
    not kept waiting for the thaw."""
    stats = WorkerStats(["render_tickets"])
    host = RenderHost(Settings(render_timeout=1.0), stats)
    try:
        await host.render_to(1, demo_order(1).to_json(), tmp_path / "order-1.pdf")
        first = host.pid
        assert first is not None
        freezer1.add(first)
        freezer1.freeze(True)
        try:
            await host.render_to(2, demo_order(2).to_json(), tmp_path / "order-2.pdf")
            assert (tmp_path / "order-2.pdf").read_bytes().startswith(b"%PDF-")
            assert host.pid is not None and host.pid != first
            assert not gone([first])     # frozen: its SIGKILL waits for the thaw
        finally:
            freezer1.freeze(False)
        poll(lambda: gone([first]), what="the thawed process dead of its SIGKILL")
        assert stats.counters["render_hangs"].get("render_tickets", 0) == 0
    finally:
        await host.close()


_PAUSED_HOST = """
import asyncio, json, sys
from pathlib import Path
from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.tickets.render_host import RenderHost
from stagedoor.telemetry.metrics import WorkerStats

async def main():
    out = Path(sys.argv[1])
    stats = WorkerStats(["render_tickets"])
    host = RenderHost(Settings(render_timeout=1.0), stats)
    await host.render_to(1, demo_order(1).to_json(), out / "order-1.pdf")
    print(host.pid, flush=True)
    sys.stdin.readline()            # the render process is frozen now
    render = asyncio.create_task(host.render_to(2, demo_order(2).to_json(),
                                                out / "order-2.pdf"))
    await asyncio.sleep(0.05)
    print("sent", flush=True)       # and now this process is frozen with it
    try:
        await render
        outcome = "ok"
    except Exception as e:
        outcome = f"{type(e).__name__}: {e}"
    print(json.dumps({"outcome": outcome,
                      "hangs": stats.counters["render_hangs"].get("render_tickets", 0)}),
          flush=True)
    await host.close()

asyncio.run(main())
"""


def test_a_paused_container_is_no_renders_verdict(tmp_path: Path, cgroup2: _Cgroup) -> None:
    """`docker pause` freezes the worker with its render process.  A render in flight
    then, after the thaw, has been without a reply for longer than render_timeout by
    the worker's clock, though neither process ran: the worker must not blame it (the
    watch's lateness is its own, and the render process used no CPU)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), os.environ.get("PYTHONPATH", "")])}
    with subprocess.Popen([sys.executable, "-c", _PAUSED_HOST, str(tmp_path)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env=env) as child:
        assert child.stdin is not None and child.stdout is not None
        try:
            render_pid = int(child.stdout.readline())
            cgroup2.add(render_pid)
            cgroup2.freeze(True)
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "sent"
            cgroup2.add(child.pid)      # the whole "container" frozen, render in flight
            time.sleep(3.0)             # three render_timeouts by any clock
            cgroup2.freeze(False)
            result = json.loads(child.stdout.readline())
            assert child.wait(30) == 0
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert result == {"outcome": "ok", "hangs": 0}, result
    assert (tmp_path / "order-2.pdf").read_bytes().startswith(b"%PDF-")
