"""What a handler gets besides its job: Redis, settings, the render pool, idempotency.

Idempotency is by outbox_id (the job's identity, the seed's Topic 45): a handler
that has side effects calls `already_done` first and `mark_done` last.  The loop
itself does not check it, so a no-op handler pays nothing, and a handler that is
naturally idempotent need not care.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis.asyncio as aioredis

from ..config import Settings
from ..job import Job
from ..metrics import WorkerStats

T = TypeVar("T")


@dataclass
class Context:
    settings: Settings
    redis: aioredis.Redis  # the 100 ms client
    consumer: str
    executor: ThreadPoolExecutor
    stats: WorkerStats
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("stagedoor.handler"))
    state: dict[str, Any] = field(default_factory=dict)  # per-worker handler state

    async def to_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run CPU or file work in the worker's pool so the loop keeps reading and acking."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    def done_key(self, job: Job) -> str:
        return self.settings.key("done", job.outbox_id)

    async def already_done(self, job: Job) -> bool:
        if await self.redis.exists(self.done_key(job)):
            self.stats.inc("duplicates", job.kind)
            self.log.info("outbox_id %d already handled; skipping", job.outbox_id,
                          extra=log_extra(job))
            return True
        return False

    async def mark_done(self, job: Job) -> None:
        await self.redis.set(self.done_key(job), job.kind, ex=self.settings.idempotency_ttl)


def log_extra(job: Job, **more: object) -> dict[str, object]:
    """The fields that join a job's log lines to the checkout that queued it."""
    return {"request_id": job.request_id, "trace": job.trace, "kind": job.kind,
            "order_id": job.order_id, "outbox_id": job.outbox_id, **more}
