"""Whether a process is running at all: what the render host (render_host.py) reads
before it blames a render that had no result within render_timeout (issue 37: a stall
is not a verdict).

A process can be kept from running in three ways that say nothing about its work:

- stopped: SIGSTOP, a debugger (state T or t in /proc/<pid>/stat);
- frozen by a cgroup freezer: cgroup v2 `cgroup.freeze` (systemd freezing a unit,
  `docker pause` on a v2 host) shows "frozen 1" in the cgroup's cgroup.events; the v1
  freezer (`docker pause` on a v1 host) shows FROZEN or FREEZING in freezer.state.  The
  process's own state is then S or D, never T: /proc/<pid>/stat alone cannot tell;
- it did not run: no CPU time (utime + stime) over the whole wait.  This covers what the
  two reads above cannot see at the moment of the verdict: a freeze that has just been
  lifted (`docker pause` of the whole container freezes the worker too; it judges the
  render at its first tick after the thaw, when nothing is frozen any more), a freezer
  outside this cgroup namespace, a host or VM that was suspended.

A render that hangs in a loop burns CPU, so it still reads as hung.  A render blocked in
a system call with the process otherwise idle (a disk or NFS mount that stopped
answering, a deadlock in native code) burns none either, and reads as "did not run":
that is the right side to err on.  A stuck disk is no order's fault, and a fresh process
rendering the order alone is the test that tells: the render host gives a render
render_rules.STALLS such runs, then fails it as a TransientError, which the worker's
policy retries and, if it never succeeds, dead-letters as a transient failure.  A
deadlock that is really the order's thus still ends in the dead-letter stream, after
more attempts, and no innocent order is dead-lettered as "render hung" because its
process was not running.

Every read returns "cannot tell" (None, False) where /proc or the cgroup files cannot be
read (another OS, a process already gone): the render host then judges as before.
"""

from __future__ import annotations

import os


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3, the state, on)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the name (field 2) is in parentheses and may hold spaces or ')': split after the last
    return stat[stat.rindex(b")") + 2:].split()


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP, a debugger: state T or t)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] in (b"T", b"t")


def cpu_ticks(pid: int) -> int | None:
    """The CPU time the process has used, all its threads, user and system, in clock
    ticks (utime + stime: fields 14 and 15 of /proc/<pid>/stat); None if unreadable."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 13:
        return None
    return int(fields[11]) + int(fields[12])    # fields 14 and 15, counted from field 3


def _mounts() -> dict[str, tuple[str, str]]:
    """cgroup hierarchy -> (the mount's root in the hierarchy, where it is mounted):
    "" for the v2 hierarchy, "freezer" for the v1 freezer."""
    found: dict[str, tuple[str, str]] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, after = left.split(), right.split()
        if len(fields) < 5 or len(after) < 3:
            continue
        root, point = fields[3], fields[4].replace("\\040", " ")
        if after[0] == "cgroup2":
            found.setdefault("", (root, point))
        elif after[0] == "cgroup" and "freezer" in after[2].split(","):
            found.setdefault("freezer", (root, point))
    return found


def _under(mount: tuple[str, str], path: str) -> str | None:
    """The directory of cgroup `path` (as /proc/<pid>/cgroup gives it) in this mount."""
    root, point = mount
    if root != "/":
        if path != root and not path.startswith(root + "/"):
            return None     # a cgroup this mount does not show
        path = path[len(root):]
    return os.path.join(point, path.lstrip("/"))


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def frozen(pid: int) -> bool:
    """Whether a cgroup freezer holds the process: its v2 cgroup reports "frozen 1"
    (which counts a frozen ancestor too), or its v1 freezer cgroup FROZEN or FREEZING
    (freezer.state is the effective state, a frozen parent's included)."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    mounts: dict[str, tuple[str, str]] | None = None
    for line in lines:
        _id, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if controllers == "":
            kind, name = "", "cgroup.events"
        elif "freezer" in controllers.split(","):
            kind, name = "freezer", "freezer.state"
        else:
            continue
        if mounts is None:
            mounts = _mounts()
        mount = mounts.get(kind)
        where = _under(mount, path) if mount is not None else None
        if where is None:
            continue
        text = _read(os.path.join(where, name))
        if kind == "" and "frozen 1" in text.splitlines():
            return True
        if kind == "freezer" and text.strip() in ("FROZEN", "FREEZING"):
            return True
    return False


def not_running(pid: int, ticks_before: int | None) -> str | None:
    """Why the process is not running, or did not run since `ticks_before`
    (cpu_ticks then): "stopped", "frozen", "idle" (no CPU time since); None when it
    ran, or when that cannot be told."""
    if stopped(pid):
        return "stopped"
    if frozen(pid):
        return "frozen"
    if ticks_before is not None and cpu_ticks(pid) == ticks_before:
        return "idle"
    return None
