"""Running one console operation (stagedoor.console.*) from the CLI: an asyncio client,
one event loop, the documented exit codes, JSON or text out, one-line errors.

    0  done          1  Redis answered with an error, or something asked for is missing
    2  bad arguments (EX_USAGE)           69  Redis cannot be reached (EX_UNAVAILABLE)
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis

from .. import config
from ..console.client import console_client
from ..stream.errors import OUTAGE_ERRORS, first_line
from .commands.status import unreachable


def run_op(prog: str, settings: config.Settings,
           action: Callable[[aioredis.Redis], Awaitable[int]]) -> int:
    async def main() -> int:
        client = console_client(settings)
        try:
            return await action(client)
        finally:
            await client.aclose()

    try:
        return asyncio.run(main())
    except OUTAGE_ERRORS as e:
        return unreachable(prog, settings, e)
    except redis.ResponseError as e:
        print(f"{prog}: Redis error: {first_line(e)}", file=sys.stderr)
        return 1


def write_json(doc: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE))
    sys.stdout.flush()


def print_table(rows: Sequence[Sequence[str]]) -> None:
    """rows[0] the head: columns padded to their widest cell, the last one left as is
    (the long one: an error, a reason)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)),
                         row[-1]]))


def confirm(question: str) -> bool:
    """Ask on the terminal; anything but y/yes is no."""
    try:
        answer = input(question + " [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
