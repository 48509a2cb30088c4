"""The supervisor's bookkeeping: a worker process (Handle), a slot, the supervisor's options.

A slot k is consumer settings.consumer_name(k) forever; it has one *current* process
and, during a rolling restart or a memory recycle, a *replacement*.  A process being
stopped is *retiring*.  Of the live processes of one consumer name at most one reads
(one that is not `held`).  Plain data: loop.py changes it, decisions.py reads numbers
from it, report.py shows it.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from typing import Any

from ..worker.family import ProcessFamily
from .process import Process


@dataclass
class Handle:
    """A live worker process as the policy sees it."""

    proc: Process
    slot: int
    consumer: str
    role: str                       # "current" | "replacement" | "retiring"
    started: float
    reason: str = ""                # why it is a replacement / retiring
    ready_at: float | None = None
    last_hb: float | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    rss: int = 0
    cpu: float = 0.0                # percent of a CPU since the last status look
    buffer: bytes = b""
    stop_deadline: float | None = None
    abort_deadline: float | None = None
    # Its memory and CPU with its render process's (worker/family.py); cpu_seen is
    # (monotonic time, CPU seconds) at the last status look, for the percent.
    family: ProcessFamily | None = None
    cpu_seen: tuple[float, float] = (0.0, 0.0)
    alone: str | None = None        # the entry it runs alone now (redelivery isolation)
    hung: str = ""                  # why the supervisor sent it SIGABRT, if it did
    page: mmap.mmap | None = None   # its handled counters, shared (telemetry/shared_counts.py)
    # Forked while another live process had its consumer name (a rolling restart, a
    # memory recycle, a slot given back by SIGTTOU and taken again by SIGTTIN): it boots
    # and reports READY but reads nothing until the supervisor writes "g" down its
    # lifeline, once every other process of that name has exited (pool._hand_over).
    held: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def ready(self) -> bool:
        return self.ready_at is not None


@dataclass
class Slot:
    index: int
    current: Handle | None = None
    replacement: Handle | None = None
    next_spawn: float | None = 0.0  # when to fork a current; None: not wanted now
    crashes: int = 0                # consecutive runtime crashes (backoff exponent)
    boot_failures: int = 0          # consecutive deaths before READY
    last_boot_code: int | None = None
    recycle_after: float = 0.0      # no memory recycle before this (after a failed one)
    # (entry id, cause): the entry that killed the slot's last worker while it ran
    # alone; its next worker dead-letters it at boot (cleared when one is READY)
    killer: tuple[str, str] | None = None


@dataclass(frozen=True)
class Options:
    """Supervisor-only knobs (flags, not Settings: they mean nothing to a worker)."""

    flap_max: int = 20
    flap_window: float = 60.0
    boot_retries: int = 3
    status_file: str = ""
