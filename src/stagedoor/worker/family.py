"""What a worker answers for: its own process and its children's (the render process).

    family = ProcessFamily(os.getpid())
    family.rss()            # bytes resident now, for the heartbeat and max_worker_memory
    family.cpu_seconds()    # CPU used since the worker started, for the slot's metric

Render isolation (tickets/render_host.py, the default) moved the native renderer into a
child process of the worker: the part most likely to leak, and the part that does most
of a real job's work.  Counted alone, the worker's RSS stayed flat while the child grew
(max_worker_memory never fired), and its CPU left out the renders.  The child's memory
and CPU are the worker's, since recycling the worker ends its render process too.

The children are read from /proc/<pid>/task/<tid>/children (a list the kernel keeps,
one small read per thread), not with psutil's children(), which reads every process's
stat on the host, once a heartbeat (docs/benchmarks.md, "Why the code is the way it is").
A kernel without that file (CONFIG_PROC_CHILDREN off) falls back to psutil.  Any
process may ask about any other of its user's (the supervisor asks about its workers).
"""

from __future__ import annotations

import contextlib
import os

import psutil


class ProcessFamily:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._self = psutil.Process(pid)
        self._kids: dict[int, psutil.Process] = {}    # pid -> handle, while alive
        self._cpu_high = 0.0

    def _child_pids(self) -> set[int]:
        pids: set[int] = set()
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return {c.pid for c in self._self.children()}
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/children", "rb") as f:
                    pids.update(int(p) for p in f.read().split())
            except FileNotFoundError:
                if not os.path.exists(f"/proc/{self.pid}/task/{tid}"):
                    continue    # a thread that ended between the two reads
                return {c.pid for c in self._self.children()}   # no such file here
            except OSError:
                continue
        return pids

    def _children(self) -> list[psutil.Process]:
        pids = self._child_pids()
        for gone in self._kids.keys() - pids:
            del self._kids[gone]
        kids = []
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                kids.append(self._kids.get(pid)
                            or self._kids.setdefault(pid, psutil.Process(pid)))
        return kids

    def rss(self) -> int:
        """Bytes resident in the worker and its live children, now."""
        rss = int(self._self.memory_info().rss)
        for kid in self._children():
            with contextlib.suppress(psutil.Error):
                rss += int(kid.memory_info().rss)
        return rss

    def cpu_seconds(self) -> float:
        """User + system CPU of the worker and of every child it has had, since it started.

        A child that has exited and been waited for is in the worker's own children_*
        times; a live one is read itself.  The worker's times are read first: a child
        reaped between the two reads is then missed for one look, never counted twice,
        and the figure is held at its highest so a counter built on it never goes back.
        """
        t = self._self.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for kid in self._children():
            with contextlib.suppress(psutil.Error):
                k = kid.cpu_times()
                total += k.user + k.system + k.children_user + k.children_system
        self._cpu_high = max(self._cpu_high, float(total))
        return self._cpu_high
