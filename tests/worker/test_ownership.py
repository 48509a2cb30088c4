"""The consumer-name claim's liveness rule (stagedoor.worker.ownership.holder_gone),
against real processes: a holder's name is taken over before its claim expires only
when its process provably no longer runs on this machine."""

from __future__ import annotations

import os
import subprocess

from stagedoor.worker.ownership import holder_gone, machine_id, start_ticks


def me(**over: object) -> dict[str, object]:
    return {"pid": os.getpid(), "start": start_ticks(os.getpid()), "machine": machine_id(),
            **over}


def test_a_live_holder_is_never_taken_over() -> None:
    here = machine_id()
    assert here and start_ticks(os.getpid()) is not None
    assert not holder_gone(me(), here)
    assert not holder_gone(me(start=None), here)  # unsure: wait for its expiry


def test_a_dead_or_reused_pid_on_this_machine_is_gone() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert holder_gone(me(pid=child.pid), machine_id())
    assert holder_gone(me(start=start_ticks(os.getpid()) - 1), machine_id())  # pid reused


def test_a_holder_on_another_machine_or_namespace_is_waited_for() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert not holder_gone(me(pid=child.pid, machine="other-boot/pid:[1]"), machine_id())
    assert not holder_gone(me(pid=child.pid), "")
    assert not holder_gone({"pid": "x", "machine": machine_id()}, machine_id())


def test_an_exited_holder_not_yet_reaped_is_gone() -> None:
    """A zombie: its parent (a supervisor, a shell, a test) has not waited for it yet;
    /proc still shows its pid and start time, and kill(pid, 0) still succeeds."""
    child = subprocess.Popen(["true"])
    try:
        holder = {"pid": child.pid, "start": None, "machine": machine_id()}
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        holder["start"] = start_ticks(child.pid)
        assert holder["start"] == -1
        holder["start"] = 12345  # what it recorded while it ran
        assert holder_gone(holder, machine_id())
    finally:
        child.wait()
