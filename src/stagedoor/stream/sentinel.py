"""Redis Sentinel: find the current master, for every client stagedoor opens.

    redis+sentinel://[user[:password]@]host:port[,host:port...]/<master-name>[/<db>][?opts]
    rediss+sentinel://...   the same, TLS to the master (the query's ssl_* options)

The user and password of the URL (or `redis_password_file`) are the master's; the
sentinels have their own: `sentinel_username`, `sentinel_password_file`, and TLS to
them when `sentinel_tls_ca_file` names a CA.  redis-py's Sentinel does the asking
(SENTINEL MASTERS, checks the master is neither sdown nor odown) and its pools
re-ask on every new connection; its connections turn a READONLY reply (and, in recent
redis-py, the UNBLOCKED one) into a ConnectionError (a demoted master), which the
worker retries like any outage; the other wordings of a replica (MASTERDOWN, "WAIT
cannot be used with replica instances") stay ResponseErrors: errors.master_changed
recognises all of them (the producer, queue.py).  The lean hot-path connection (resp.py)
asks through `discover_master` on each connect.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, TypeVar

import redis
import redis.asyncio as aioredis
from redis.asyncio.sentinel import MasterNotFoundError as AsyncMasterNotFoundError
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.sentinel import MasterNotFoundError
from redis.sentinel import Sentinel as SyncSentinel

from ..config import Settings
from ..config.urls import SentinelTarget, parse_sentinel
from .auth import add_url_auth, read_password_file
from .options import CLIENT_NAME, NO_SETINFO, no_retry

SCHEMES = ("redis+sentinel", "rediss+sentinel")


def is_sentinel_url(url: str) -> bool:
    return url.split("://", 1)[0] in SCHEMES


# the URL's parts (config/urls.py checks them when the settings load)
parse = parse_sentinel


# What a MasterNotFoundError says when the sentinels know the name but the master is
# down (describe_no_master keys off it): redis-py says "No master found" for both.
MASTER_DOWN = "is down"


def down_text(state: dict[str, Any]) -> str:
    """': the master h:p is down (flags ...); a failover is in progress' from a master's
    SENTINEL MASTERS state, which redis-py's check_master_state refused."""
    flags = state.get("flags", "")
    flags = flags if isinstance(flags, str) else ",".join(sorted(flags))
    if "failover_in_progress" in flags:
        then = "a failover is in progress: the workers and producers retry until it ends"
    elif "s_down" in flags or "o_down" in flags:
        then = ("no replica promoted yet (a failover starts once a quorum of sentinels "
                "agree, and needs a replica in sync)")
    else:  # not a master (a demoted one not yet reconfigured), or too few sentinels
        then = "not usable as master now"
    return (f": the master {state.get('ip')}:{state.get('port')} {MASTER_DOWN} "
            f"(flags {flags}); {then}")


# The state of a known master that check_master_state refused, per caller: a context
# variable, not an attribute, because the asyncio client discovers the master from
# several tasks at once (a pipeline's connections, gathered calls), and one call's reset
# would erase another's finding (the wrong-name text for a master that is down).
ConnectionError_ = TypeVar("ConnectionError_", bound=redis.ConnectionError)
_REFUSED: ContextVar[dict[str, Any] | None] = ContextVar("sentinel_refused", default=None)


class _NamesTheCause:
    """Mixed into redis-py's Sentinel: its MasterNotFoundError says the same for a name
    the sentinels do not monitor (a wrong URL) and for a master that is down or mid-
    failover.  check_master_state sees the state of a known master; keep the one it
    refused, and say so in the error."""

    def check_master_state(self, state: dict[str, Any], service_name: str) -> bool:
        ok: bool = super().check_master_state(state, service_name)  # type: ignore[misc]
        if not ok:
            _REFUSED.set(state)
        return ok

    @staticmethod
    def _named(e: ConnectionError_) -> ConnectionError_:
        """e with the refused state named; of e's own class (redis-py has a sync and an
        asyncio MasterNotFoundError, unrelated: stream/errors.py MASTER_NOT_FOUND)."""
        refused = _REFUSED.get()
        _REFUSED.set(None)
        if refused is None:
            return e
        head, sep, errors = str(e).partition(" : ")
        return type(e)(head + down_text(refused) + sep + errors)


class NamingSyncSentinel(_NamesTheCause, SyncSentinel):
    def discover_master(self, service_name: str) -> Any:
        _REFUSED.set(None)
        try:
            return super().discover_master(service_name)
        except MasterNotFoundError as e:
            raise self._named(e) from None


class NamingAsyncSentinel(_NamesTheCause, AsyncSentinel):
    async def discover_master(self, service_name: str) -> Any:
        _REFUSED.set(None)
        try:
            return await super().discover_master(service_name)
        except AsyncMasterNotFoundError as e:
            raise self._named(e) from None


def sentinel_kwargs(settings: Settings, *, asynchronous: bool = False) -> dict[str, Any]:
    """Connection options for the sentinels themselves (not the master's)."""
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
    manager = NamingAsyncSentinel(list(target.sentinels),
                                  sentinel_kwargs=sentinel_kwargs(settings, asynchronous=True))
    client: aioredis.Redis = manager.master_for(target.service,
                                                **master_kwargs(target, kwargs))
    return client


def sync_master(settings: Settings, kwargs: dict[str, Any]) -> redis.Redis:
    target = parse(settings.redis_url)
    manager = NamingSyncSentinel(list(target.sentinels),
                                 sentinel_kwargs=sentinel_kwargs(settings))
    client: redis.Redis = manager.master_for(target.service, **master_kwargs(target, kwargs))
    return client


async def discover_master(settings: Settings) -> tuple[str, int]:
    """The current master's address, asked of the sentinels (the lean connection's way)."""
    target = parse(settings.redis_url)
    manager = NamingAsyncSentinel(list(target.sentinels),
                                  sentinel_kwargs=sentinel_kwargs(settings, asynchronous=True))
    try:
        host, port = await manager.discover_master(target.service)
    except redis.sentinel.MasterNotFoundError as e:
        raise redis.ConnectionError(f"no master for {target.service!r}: {e}") from None
    finally:
        for s in manager.sentinels:
            await s.aclose()
    return str(host), int(port)
