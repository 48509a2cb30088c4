"""The options every redis-py client of stagedoor's is made with (connection.py), the
Sentinel's and the Cluster's own clients included (sentinel.py, cluster.py): RESP2, no
library retries, the settings' timeouts, no CLIENT SETINFO, and a client name.
connection.py's docstring says why each."""

from __future__ import annotations

from typing import Any

import redis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff

from ..config import Settings
from . import auth

try:  # redis-py >= 8.1: lib_name/lib_version are deprecated in favour of driver_info
    from redis.driver_info import DriverInfo

    NO_SETINFO: dict[str, Any] = {"driver_info": DriverInfo(name=None, lib_version=None)}
except ImportError:  # pragma: no cover - older redis-py
    NO_SETINFO = {"lib_name": None, "lib_version": None}

# The name every client without a name of its own gives itself (CLIENT SETNAME).  It
# says who is who in CLIENT LIST, and over TLS it is what makes a new connection usable:
# with no command in the handshake (we send no CLIENT SETINFO), the TLS 1.3 session
# tickets the server sends after the handshake are still unread when redis-py's sync
# pool checks a new connection for stray data, and it refuses the connection
# ("Connection not ready"); SETNAME's reply reads past them.  Sentinels too.
CLIENT_NAME = "stagedoor"

def no_retry(*, asynchronous: bool) -> redis.retry.Retry | AsyncRetry:
    """No library retries, in the client's own flavour: redis-py >= 8.2 warns when an
    asyncio client is given the synchronous Retry (and converts it)."""
    return AsyncRetry(NoBackoff(), 0) if asynchronous else redis.retry.Retry(NoBackoff(), 0)


def client_kwargs(settings: Settings, *, blocking: bool = False,
                  asynchronous: bool = False) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "protocol": 2,
        "socket_timeout": settings.read_socket_timeout if blocking else settings.socket_timeout,
        "socket_connect_timeout": settings.connect_timeout,
        "retry": no_retry(asynchronous=asynchronous),
        "retry_on_timeout": False,
        "health_check_interval": 0,
        "decode_responses": False,
        **NO_SETINFO,
    }
    password = auth.password(settings)
    if password is not None:
        kwargs["password"] = password
    return kwargs
