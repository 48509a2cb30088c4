"""Redis Cluster: clients that follow the slot map, and where the queue's slot lives.

    redis+cluster://host:port[,host:port...][/0][?opts]   (rediss+cluster: TLS)

The hosts are seeds; the cluster tells the rest.  redis-py's RedisCluster is every
redis-py client here (it routes each command and script by its keys' slot and follows
MOVED and ASK); the lean hot-path connection (resp.py) talks only about the stream,
so it connects to the master of the stream's slot, found with CLUSTER SLOTS on a
seed, and follows MOVED (reconnect there) and ASK (reconnect there and send ASKING
before each command until the migration is over) itself.

Every script touches one slot (stream/keys.py: the tagged layout), which the
settings check: under redis+cluster:// the stream and the dead-letter stream must
hash to one slot, and the default names are `{jobs}` and `{jobs}:dead`.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode as AsyncNode
from redis.asyncio.cluster import RedisCluster as AsyncCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from ..config import Settings
from ..config.urls import ClusterTarget, parse_cluster
from ..errors import StagedoorError
from . import auth
from .auth import add_url_auth
from .options import NO_SETINFO, client_kwargs

SCHEMES = ("redis+cluster", "rediss+cluster")
# redis-py node-client options RedisCluster does not take.
_NOT_FOR_CLUSTER = ("single_connection_client", "db", "retry_on_timeout")


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0] in SCHEMES


# the URL's parts (config/urls.py checks them, and that the streams share a slot)
parse = parse_cluster


def _kwargs(target: ClusterTarget, kwargs: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in kwargs.items() if k not in _NOT_FOR_CLUSTER}
    return add_url_auth(out, target)


def async_cluster(settings: Settings, kwargs: dict[str, Any]) -> aioredis.RedisCluster:
    target = parse(settings.redis_url)
    return AsyncCluster(startup_nodes=[AsyncNode(h, p) for h, p in target.seeds],
                        **_kwargs(target, kwargs))


def sync_cluster(settings: Settings, kwargs: dict[str, Any]) -> RedisCluster:
    target = parse(settings.redis_url)
    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in target.seeds],
                        **_kwargs(target, kwargs))


def slot_owner(slots_reply: Any, slot: int) -> tuple[str, int] | None:
    """The master of `slot` in a CLUSTER SLOTS reply."""
    for start, end, master, *_ in slots_reply:
        if int(start) <= slot <= int(end):
            host = master[0].decode() if isinstance(master[0], bytes) else str(master[0])
            return host or "127.0.0.1", int(master[1])
    return None


def redirect(text: str) -> tuple[str, str, int] | None:
    """('MOVED'|'ASK', host, port) of a redirection reply, else None."""
    parts = text.split()
    if len(parts) == 3 and parts[0] in ("MOVED", "ASK"):
        host, _, port = parts[2].rpartition(":")
        return parts[0], host or "127.0.0.1", int(port)
    return None


class Redirected(StagedoorError, redis.ConnectionError):
    """MOVED or ASK for the stream's slot: reconnect to the node named (resp.py)."""

    def __init__(self, text: str, kind: str, host: str, port: int) -> None:
        super().__init__(f"{text} (following the cluster)")
        self.kind, self.address = kind, (host, port)


async def stream_node(settings: Settings) -> tuple[str, int]:
    """The master serving the stream's slot, from CLUSTER SLOTS of the first seed that
    answers (the lean connection's way; redis-py's cluster client keeps its own map)."""
    target = parse(settings.redis_url)
    slot = key_slot(settings.stream.encode())
    # No library retries: a dead seed must cost one refused connect, not a backoff.
    kwargs = _kwargs(target, {"protocol": 2, "socket_timeout": max(settings.socket_timeout, 0.5),
                              "socket_connect_timeout": settings.connect_timeout,
                              "retry": Retry(NoBackoff(), 0), **NO_SETINFO})
    file_password = auth.password(settings)
    if file_password:
        kwargs["password"] = file_password
    error: Exception | None = None
    for host, port in target.seeds:
        client = aioredis.Redis(host=host, port=port, **kwargs)
        try:
            owner = slot_owner(await client.execute_command("CLUSTER", "SLOTS"), slot)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            error = e
            continue
        finally:
            await client.aclose()
        if owner is not None:
            return owner
    if error is None:  # every seed answered: the slot has no owner
        raise redis.ConnectionError(f"cluster not ready: slots not assigned (slot {slot} of "
                                    f"{settings.stream!r} has no owner in CLUSTER SLOTS)")
    raise redis.ConnectionError(f"no cluster seed serves slot {slot} of "
                                f"{settings.stream!r}: {error}")


def not_ready(settings: Settings) -> str | None:
    """'cluster_state:fail on h:p (...)' when the first seed that answers CLUSTER INFO says
    the cluster is not ok, else None.  For the CLI's error line: with a master down and
    no replica, redis-py reports the refused connect to the dead node (or CLUSTERDOWN),
    while the cause an operator acts on is the cluster's state."""
    target = parse(settings.redis_url)
    kwargs = _kwargs(target, client_kwargs(settings))
    kwargs["socket_timeout"] = max(settings.socket_timeout, 1.0)
    for host, port in target.seeds:
        client = redis.Redis(host=host, port=port, **kwargs)
        try:
            reply = client.execute_command("CLUSTER", "INFO")
        except (redis.RedisError, OSError):
            continue
        finally:
            client.close()
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        info = dict(line.split(":", 1) for line in text.split() if ":" in line)
        if info.get("cluster_state", "ok") == "ok":
            return None
        return (f"cluster_state:{info.get('cluster_state')} on {host}:{port} (slots assigned "
                f"{info.get('cluster_slots_assigned')} of 16384, ok "
                f"{info.get('cluster_slots_ok')}, failing {info.get('cluster_slots_fail')})")
    return None
