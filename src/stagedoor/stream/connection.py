"""Redis clients with the timeouts the seed asks for, and nothing hidden.

The password file and TLS are auth.py's (shared with the hot-path connection, resp.py).

redis-py 8 defaults are a 5 s socket timeout, library retries and RESP3.  We pin
RESP2 (its XREADGROUP/XAUTOCLAIM shapes are what the worker parses), turn off the
library's retries (they can duplicate an XADD and hide an outage; we retry with our
own backoff), keep 100 ms for every call, and give the one blocking read its own
client whose socket timeout is longer than BLOCK.

The stream commands' response callbacks are removed: the worker wants the raw flat
field lists (a dict would hide a duplicated field) and skips the dict building.

No CLIENT SETINFO: redis-py sends it on every connect unless lib_name/lib_version are
None; Redis 7.0 does not know it, and on Redis >= 7.2 and Valkey the least-privilege
worker user is refused it and every connect leaves a denial in ACL LOG.  The lean
hot-path connection (resp.py) never sends it either.
"""

from __future__ import annotations

import re
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.cluster import RedisCluster

from ..config import ConfigError, Settings
from ..errors import StagedoorError
from . import auth, cluster, sentinel
from .options import CLIENT_NAME, client_kwargs

RAW_COMMANDS = ("XREADGROUP", "XAUTOCLAIM", "XRANGE", "XREVRANGE", "XPENDING", "HELLO")
MIN_SERVER = (7, 0, 5)
# Errors that mean "Redis is away or slow": retry with backoff, re-read own pending.
# On a cluster also: CLUSTERDOWN and TRYAGAIN while a failover or a migration is under
# way, and redis-py's "TTL exhausted" after too many redirections in a row (the first
# two are ResponseErrors: catch these before ResponseError).
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError, redis.TimeoutError, ConnectionError, TimeoutError, OSError,
    redis.BusyLoadingError, redis.exceptions.ClusterError, redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)


class ServerTooOld(StagedoorError, RuntimeError):
    pass


class SharedContextSSLConnection(aioredis.SSLConnection):
    """A TLS connection on the process's shared SSLContext for its options (auth.py).

    redis-py builds a context (the system CA store: ~0.13 s of CPU) for every new
    connection, on the event loop; 8 jobs arriving on a cold pool then stall the loop
    for a second and 100 ms calls time out.  The hot-path connections (resp.py) use
    the same context.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ssl_context.context = auth.tls_context(kwargs)


def _strip_callbacks(client: Any) -> None:
    if isinstance(client, RedisCluster):
        # The sync cluster client parses with each node's own client: strip those, now
        # and for every node it creates later (a failover, a new master).
        manager = client.nodes_manager
        create = manager.create_redis_node

        def created(*args: Any, **kwargs: Any) -> Any:
            node = create(*args, **kwargs)
            _strip_callbacks(node)
            return node
        manager.create_redis_node = created  # type: ignore[method-assign]
        for node in client.get_nodes():
            if node.redis_connection is not None:
                _strip_callbacks(node.redis_connection)
        callbacks = client.cluster_response_callbacks
    else:
        callbacks = client.response_callbacks
    for name in RAW_COMMANDS:
        callbacks.pop(name, None)
        callbacks.pop(name.lower(), None)


def _url(settings: Settings) -> str:
    if not settings.redis_url:
        raise ConfigError("redis_url is empty: set STAGEDOOR_REDIS_URL or --redis-url")
    return settings.redis_url


def _producer_timeout(settings: Settings) -> float:
    """A producer's socket timeout: above WAIT's own, when its XADDs end with a WAIT."""
    if not settings.replicas_to_wait:
        return settings.socket_timeout
    # A second of margin: WAIT answers at its own timeout, and a reply a loaded box
    # delivers a little later must still be read (NotReplicated, not "no answer").
    return max(settings.socket_timeout, 1.0) + settings.wait_timeout_ms / 1000


def async_client(settings: Settings, *, blocking: bool = False, name: str | None = None,
                 producer: bool = False, timeout: float | None = None) -> aioredis.Redis:
    """An asyncio client: 100 ms calls, or the blocking reader with timeout > BLOCK.

    `producer`: the socket timeout leaves room for the WAIT after enqueue's XADDs.
    `timeout`: another socket timeout (the console's, console/client.py)."""
    kwargs = client_kwargs(settings, blocking=blocking, asynchronous=True)
    if producer:
        kwargs["socket_timeout"] = _producer_timeout(settings)
    if timeout is not None:
        kwargs["socket_timeout"] = timeout
    if name:
        kwargs["client_name"] = name
    url = _url(settings)
    if sentinel.is_sentinel_url(url):  # always the current master (stream/sentinel.py)
        client = sentinel.async_master(settings, kwargs)
        _strip_callbacks(client)
        return client
    if cluster.is_cluster_url(url):  # routed by slot (stream/cluster.py)
        acluster: Any = cluster.async_cluster(settings, kwargs)
        _strip_callbacks(acluster)
        return acluster  # type: ignore[no-any-return]
    if blocking:
        # One connection: the blocking read is the only thing it does.
        kwargs["single_connection_client"] = True
    client = aioredis.Redis.from_url(url, **kwargs)
    if url.startswith("rediss:"):
        # Set on the pool: from_url lets the URL's scheme win over a connection_class.
        client.connection_pool.connection_class = SharedContextSSLConnection
    _strip_callbacks(client)
    return client


def sync_client(settings: Settings, *, timeout: float | None = None,
                name: str = CLIENT_NAME) -> redis.Redis:
    """A blocking-IO client for CLI tools and producers outside an event loop.

    The socket timeout leaves room for the WAIT after enqueue's XADDs (queue.py); the
    name is not optional over TLS (CLIENT_NAME says why)."""
    kwargs = client_kwargs(settings)
    kwargs["socket_timeout"] = max(timeout or 0.0, _producer_timeout(settings))
    kwargs["client_name"] = name
    url = _url(settings)
    if sentinel.is_sentinel_url(url):
        client = sentinel.sync_master(settings, kwargs)
    elif cluster.is_cluster_url(url):
        client = cluster.sync_cluster(settings, kwargs)  # type: ignore[assignment]
    else:
        client = redis.Redis.from_url(url, **kwargs)
    _strip_callbacks(client)
    return client


def parse_version(text: str) -> tuple[int, int, int]:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    if not m:
        raise ServerTooOld(f"cannot read Redis version {text!r}")
    return int(m[1]), int(m[2]), int(m[3])


def check_server(hello: dict[Any, Any], settings: Settings) -> tuple[int, int, int]:
    """HELLO's features, not its version string where a feature says it: the floor,
    and a cluster node (HELLO's `mode`) needs a redis+cluster:// URL."""
    mode = hello.get(b"mode", hello.get("mode", b""))
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode == "cluster" and not cluster.is_cluster_url(settings.redis_url):
        raise ConfigError("the server is a Redis Cluster node: use redis+cluster://host:port"
                          "[,host:port...] (stream and dead stream hash-tagged, docs/scaling.md)")
    return check_version({"redis_version": hello.get(b"version", hello.get("version", b""))})


def check_version(info: dict[Any, Any]) -> tuple[int, int, int]:
    """Refuse Redis < 7.0.5 (6.2's XAUTOCLAIM loops on trimmed entries; 7.0.0-4 have CVEs)."""
    raw = info.get("redis_version") or info.get(b"redis_version") or ""
    version = parse_version(raw.decode() if isinstance(raw, bytes) else str(raw))
    if version < MIN_SERVER:
        have = ".".join(map(str, version))
        raise ServerTooOld(f"Redis {have} is too old: stagedoor needs Redis >= 7.0.5 "
                           "(XAUTOCLAIM's deleted-entry reply and fixed CVEs)")
    return version
