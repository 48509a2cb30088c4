"""Redis Sentinel: find the current master, for every client stagedoor opens.

    redis+sentinel://[user[:password]@]host:port[,host:port...]/<master-name>[/<db>][?opts]
    rediss+sentinel://...   the same, TLS to the master (the query's ssl_* options)

The user and password of the URL (or `redis_password_file`) are the master's; the
sentinels have their own: `sentinel_username`, `sentinel_password_file`, and TLS to
them when `sentinel_tls_ca_file` names a CA.  redis-py's Sentinel does the asking
(SENTINEL MASTERS, checks the master is neither sdown nor odown) and its pools
re-ask on every new connection; its connections turn a READONLY reply into a
ConnectionError (a demoted master), which the worker retries like any outage.  The
lean hot-path connection (resp.py) asks through `discover_master` on each connect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import redis
import redis.asyncio as aioredis
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.sentinel import Sentinel as SyncSentinel

from ..config import ConfigError, Settings
from .auth import add_url_auth, read_password_file

SCHEMES = ("redis+sentinel", "rediss+sentinel")


def is_sentinel_url(url: str) -> bool:
    return url.split("://", 1)[0] in SCHEMES


@dataclass(frozen=True)
class SentinelTarget:
    """A parsed redis+sentinel:// URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None
    tls: bool
    options: dict[str, str]  # the query: ssl_* options of the master connection


def parse(url: str) -> SentinelTarget:
    parts = urlsplit(url)
    where = "redis_url (sentinel)"
    hosts = parts.netloc.rsplit("@", 1)[-1]
    sentinels: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{where}: {item!r} is not host:port")
        sentinels.append((host.strip("[]"), int(port)))
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ConfigError(f"{where}: the path must be /<master-name>[/<db>]")
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    user, _, password = userinfo.partition(":")
    return SentinelTarget(
        sentinels=tuple(sentinels), service=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(user) or None, password=unquote(password) or None,
        tls=parts.scheme == "rediss+sentinel", options=dict(parse_qsl(parts.query)))


def sentinel_kwargs(settings: Settings, *, asynchronous: bool = False) -> dict[str, Any]:
    """Connection options for the sentinels themselves (not the master's)."""
    from .connection import CLIENT_NAME, NO_SETINFO, no_retry

    # No library retries: a dead sentinel must cost one refused connect, not a backoff.
    kwargs: dict[str, Any] = {"socket_timeout": max(settings.socket_timeout, 0.5),
                              "socket_connect_timeout": settings.connect_timeout,
                              "retry": no_retry(asynchronous=asynchronous), "protocol": 2,
                              **NO_SETINFO,
                              "client_name": CLIENT_NAME}  # needed over TLS: see there
    if settings.sentinel_username:
        kwargs["username"] = settings.sentinel_username
    if settings.sentinel_password_file:
        kwargs["password"] = read_password_file(settings.sentinel_password_file,
                                                "sentinel_password_file")
    if settings.sentinel_tls_ca_file:
        kwargs.update(ssl=True, ssl_ca_certs=settings.sentinel_tls_ca_file)
    return kwargs


def master_kwargs(target: SentinelTarget, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The master connection's options: the URL's user, password, db and TLS options."""
    out = dict(kwargs)
    out["db"] = target.db
    return add_url_auth(out, target)


def async_master(settings: Settings, kwargs: dict[str, Any]) -> aioredis.Redis:
    target = parse(settings.redis_url)
    manager = AsyncSentinel(list(target.sentinels),
                            sentinel_kwargs=sentinel_kwargs(settings, asynchronous=True))
    client: aioredis.Redis = manager.master_for(target.service,
                                                **master_kwargs(target, kwargs))
    return client


def sync_master(settings: Settings, kwargs: dict[str, Any]) -> redis.Redis:
    target = parse(settings.redis_url)
    manager = SyncSentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs(settings))
    client: redis.Redis = manager.master_for(target.service, **master_kwargs(target, kwargs))
    return client


async def discover_master(settings: Settings) -> tuple[str, int]:
    """The current master's address, asked of the sentinels (the lean connection's way)."""
    target = parse(settings.redis_url)
    manager = AsyncSentinel(list(target.sentinels),
                            sentinel_kwargs=sentinel_kwargs(settings, asynchronous=True))
    try:
        host, port = await manager.discover_master(target.service)
    except redis.sentinel.MasterNotFoundError as e:
        raise redis.ConnectionError(f"no master for {target.service!r}: {e}") from None
    finally:
        for s in manager.sentinels:
            await s.aclose()
    return str(host), int(port)
