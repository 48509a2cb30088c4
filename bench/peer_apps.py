"""The peers' side of the no-op drain: one no-op task per framework, on $SD_BENCH_REDIS_URL.

Imported by each peer's own worker command (`dramatiq bench.peer_apps:dramatiq_broker`,
`taskiq worker bench.peer_apps:taskiq_broker`, `rq worker ...`), and by
bench/measure_peers.py to fill the backlog the way each framework's own producer does.
Every peer runs with its own defaults but one worker process, as stagedoor does.
Needs the `bench-peers` extra; each framework is imported only when asked for.
"""

from __future__ import annotations

import os
from typing import Any

URL = os.environ.get("SD_BENCH_REDIS_URL", "redis://127.0.0.1:1/0")


def _dramatiq() -> tuple[Any, Any]:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=URL)
    dramatiq.set_broker(broker)

    @dramatiq.actor(max_retries=0)
    def noop() -> None:
        pass

    return broker, noop


def _taskiq() -> tuple[Any, Any]:
    from taskiq_redis import RedisStreamBroker

    # The stream and its group are made by the bench, at id 0, before the backlog is
    # written: taskiq's own default ("$") would skip a backlog written before start.
    broker = RedisStreamBroker(URL, queue_name="taskiq", consumer_group_name="taskiq")

    @broker.task(task_name="noop")
    async def noop() -> None:
        pass

    return broker, noop


def noop_rq() -> None:
    """rq's task: a plain function found by import path."""


def __getattr__(name: str) -> Any:
    # The broker is built on first use, so importing this module needs no framework.
    makers = {"dramatiq": _dramatiq, "taskiq": _taskiq}
    for prefix, make in makers.items():
        if name in (f"{prefix}_broker", f"{prefix}_noop"):
            broker, task = make()
            globals()[f"{prefix}_broker"], globals()[f"{prefix}_noop"] = broker, task
            return globals()[name]
    raise AttributeError(name)
