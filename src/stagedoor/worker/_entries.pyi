import asyncio
import collections
from collections.abc import Callable, Sequence
from typing import Any

from stagedoor.stream.job import Job

def fast_job(raw: object, kind_names: dict[bytes, str], max_field_bytes: int) -> Job | None: ...

class FastDispatch:
    def __init__(self, *, parse: Callable[[object, dict[bytes, str], int], Job | None],
                 kind_names: dict[bytes, str], handlers: dict[str, Any],
                 max_field_bytes: int, ctx: Any, stats: Any, consumer: str,
                 generic: Callable[[bytes, list[bytes] | None], int],
                 begun: Callable[..., int], acker: Any) -> None: ...
    def run(self, entries: Sequence[tuple[bytes, list[bytes] | None]],
            loop: asyncio.AbstractEventLoop) -> int: ...

def pack_xack(stream: bytes, group: bytes, ids: list[bytes]) -> bytes: ...

class AckReply:
    acker: Any
    ids: list[bytes]
    def __init__(self, acker: Any, ids: list[bytes]) -> None: ...
    def done(self) -> bool: ...
    def cancel(self) -> bool: ...
    def set_result(self, reply: Any) -> None: ...
    def set_exception(self, error: BaseException) -> None: ...

class AheadRead:
    streak: Streak
    n: int
    acks: AckReply | None
    def __init__(self, streak: Streak, n: int) -> None: ...
    def done(self) -> bool: ...
    def cancel(self) -> bool: ...
    def set_result(self, reply: Any) -> None: ...
    def set_exception(self, error: BaseException) -> None: ...

class Streak:
    wire: collections.deque[AheadRead]
    ending: bool
    dry: bool
    error: BaseException | None
    done: asyncio.Future[None] | None
    wait: Any
    def __init__(self, reader: Any, ahead: int, cap: int) -> None: ...
    def fill(self) -> None: ...

class ReplyWait:
    MOST: int
    LIMIT: float
    COOL: int
    COOL_MOST: int
    budget: int
    cooldown: int
    backoff: int
    turns: int
    fixed: int
    missed: float
    spinning: bool
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None: ...
    def due(self) -> None: ...
    def arrived(self) -> None: ...
