"""The Redis client the CLI and the web console hand to the console's operations: an
asyncio client with no response callbacks (replies are bytes and lists, the same on
standalone, Sentinel and Cluster; telemetry/records.py reads them) and a time limit fit
for an operator's command."""

from __future__ import annotations

import redis.asyncio as aioredis

from ..config import Settings
from ..stream import connection

# The CLI's floor for a call's time limit: an operator's command may cross a WAN.
CONSOLE_TIMEOUT = 5.0


def console_client(settings: Settings, *, timeout: float = CONSOLE_TIMEOUT) -> aioredis.Redis:
    """The client the CLI and the web page hand to these operations."""
    return connection.async_client(settings, name="stagedoor-console",
                                   timeout=max(timeout, settings.socket_timeout))
