"""Process titles that say who is who in `ps` and `top` (setproctitle).

Without them the supervisor and every forked worker show the same command line.  With:

    stagedoor-supervise: supervisor of 4 workers, stream jobs, group workers
    stagedoor-supervise: worker slot 2 (ticket-host-1-02), stream jobs
    stagedoor work: worker ticket-host-1-00, stream jobs

setproctitle rewrites the argv area the kernel shows in /proc/<pid>/cmdline; it is a
small, well-kept C extension (writing argv by hand is exactly what it is for).
"""

from __future__ import annotations

from setproctitle import setproctitle

from .config import Settings

__all__ = ["set_title", "supervisor_title", "worker_title"]


def set_title(title: str) -> None:
    setproctitle(title)


def supervisor_title(settings: Settings, workers: int) -> str:
    return (f"stagedoor-supervise: supervisor of {workers} workers, stream {settings.stream}, "
            f"group {settings.group}")


def worker_title(settings: Settings, slot: int) -> str:
    return (f"stagedoor-supervise: worker slot {slot} ({settings.consumer_name(slot)}), "
            f"stream {settings.stream}")
