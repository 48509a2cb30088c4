"""The server behind the queue: version, role and memory, from one INFO.

One `INFO server replication memory` (several sections in one call: Redis >= 7.0,
Valkey), sent to the node that holds the queue's stream: on a Cluster that is the
master of the stream's hash slot, elsewhere (Sentinel included: the client follows
the master) the one server.  None when INFO is not allowed (the worker's ACL user has
no INFO; an operator's user should).
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from ..config import Settings
from ..telemetry.inspect import memory_from_info

SECTIONS = ("server", "replication", "memory")


def _text(value: Any) -> str:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


async def server_facts(client: aioredis.Redis | RedisCluster, settings: Settings
                       ) -> dict[str, Any] | None:
    """{server: redis|valkey, version, role, mode, memory: inspect.redis_memory's dict}."""
    untyped: Any = client
    try:
        if isinstance(client, RedisCluster):
            node = client.get_node_from_key(settings.stream)
            info = await untyped.execute_command("INFO", *SECTIONS, target_nodes=node)
        else:
            info = await untyped.execute_command("INFO", *SECTIONS)
    except redis.ResponseError:
        return None
    if not isinstance(info, dict):
        return None
    server = "valkey" if "valkey_version" in info else "redis"
    version = info.get("valkey_version") or info.get("redis_version") or ""
    return {"server": server, "version": _text(version), "role": _text(info.get("role", "")),
            "mode": _text(info.get("redis_mode", "")), "memory": memory_from_info(info)}
