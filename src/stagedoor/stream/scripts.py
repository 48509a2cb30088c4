"""Lua scripts on the lean connection (resp.FastConnection): EVALSHA, SCRIPT LOAD on NOSCRIPT.

redis-py's Script objects pay redis-py's client overhead per call (resp.py says
which); the built-in render_tickets handler runs two scripts per job, so they go over
a FastConnection instead.  Same protocol as redis-py's: EVALSHA
by hash, and on NOSCRIPT (a restarted or flushed server) SCRIPT LOAD and EVALSHA
again, which is what the worker's least-privilege ACL allows (no EVAL).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import redis

from .resp import FastConnection


class LeanScript:
    """One Lua script, called with keys and args on a FastConnection."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, conn: FastConnection, keys: Sequence[str | bytes],
                       args: Sequence[str | bytes | int | float] = ()) -> Any:
        try:
            return await conn.call("EVALSHA", self.sha, len(keys), *keys, *args)
        except redis.ResponseError as e:
            if not str(e).startswith("NOSCRIPT"):
                raise
        await conn.call("SCRIPT", "LOAD", self.source)
        return await conn.call("EVALSHA", self.sha, len(keys), *keys, *args)
