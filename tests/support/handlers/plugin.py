"""Handler registries loaded by `module:attr` in the registry tests."""

from __future__ import annotations

from stagedoor.handlers import Registry
from stagedoor.handlers.registry import handler
from stagedoor.stream.job import Job

registry = Registry()


@registry.register("ping", timeout=2.0)
async def ping(job: Job, ctx: object) -> None:
    return None


@handler("pong")
async def pong(job: Job, ctx: object) -> None:
    return None


mapping = {"echo": ping}
not_a_registry = 42
