"""The memory a worker answers for: its own RSS and its children's (the render process).

    rss = FamilyRss(os.getpid())()      # bytes, for the heartbeat

max_worker_memory recycles a worker whose heartbeat RSS is over the limit.  Render
isolation (handlers/render_host.py, the default) moved the native renderer, the part
most likely to leak, into a child process of the worker; counted alone, the worker's
RSS stayed flat while the child grew, and the limit never fired.  The child's RSS is
the worker's, since recycling the worker ends its render process too.

The children are read from /proc/<pid>/task/<tid>/children (a list the kernel keeps,
one small read per thread), not with psutil's children(), which reads every process's
stat on the host (0.8 ms with 83 processes here, once a heartbeat).  A kernel without
that file (CONFIG_PROC_CHILDREN off) falls back to psutil.
"""

from __future__ import annotations

import contextlib
import os

import psutil


class FamilyRss:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._self = psutil.Process(pid)
        self._kids: dict[int, psutil.Process] = {}    # pid -> handle, while alive

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

    def __call__(self) -> int:
        """Bytes resident in the worker and its live children, now."""
        rss = int(self._self.memory_info().rss)
        pids = self._child_pids()
        for gone in self._kids.keys() - pids:
            del self._kids[gone]
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                kid = self._kids.get(pid) or self._kids.setdefault(pid, psutil.Process(pid))
                rss += int(kid.memory_info().rss)
        return rss
