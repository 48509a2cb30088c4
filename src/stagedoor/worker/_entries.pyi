import asyncio
from collections.abc import Callable
from typing import Any

from stagedoor.stream.job import Job

def fast_job(raw: object, kind_names: dict[bytes, str], max_field_bytes: int) -> Job | None: ...

class FastDispatch:
    def __init__(self, *, parse: Callable[[object, dict[bytes, str], int], Job | None],
                 kind_names: dict[bytes, str], handlers: dict[str, Any],
                 max_field_bytes: int, ctx: Any, stats: Any, consumer: str,
                 generic: Callable[[bytes, list[bytes] | None], int],
                 begun: Callable[..., int], acker: Any) -> None: ...
    def run(self, entries: list[tuple[bytes, list[bytes] | None]],
            loop: asyncio.AbstractEventLoop) -> int: ...

def pack_xack(stream: bytes, group: bytes, ids: list[bytes]) -> bytes: ...
