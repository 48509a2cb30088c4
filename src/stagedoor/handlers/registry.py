"""The handler registry: kind -> async handler, extendable from `module:attr` (loading.py).

A plugin attr may be a Registry, a mapping of kind -> handler function, or a
single function registered with `@handler("kind")`.  A bad spec is a ConfigError
(exit 78), raised when the worker boots, so the supervisor reports a boot failure
instead of a pool that crashes on the first job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..stream.job import Job
    from .context import Context

HandlerFn = Callable[["Job", "Context"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Handler:
    """One registered handler: its kind, the coroutine function, its time limit."""

    kind: str
    fn: HandlerFn
    timeout: float | None = None  # None: settings.job_timeout


StartFn = Callable[["Context"], Awaitable[None]]


class Registry:
    """Handlers by job kind: what a worker can run.

        registry = Registry()

        @registry.register("send_receipt", timeout=10)
        async def send_receipt(job: Job, ctx: Context) -> None: ...

    A worker runs the built-ins merged with every `--handlers module:attr` (a later
    registration of a kind replaces an earlier one; see loading.load_registry).  An entry of a
    kind no handler is registered for is malformed for this worker: dead-lettered.
    `timeout` is the kind's time limit per attempt (None: settings.job_timeout).
    `@registry.on_start` functions run once per worker process after it reached Redis,
    before its first job (the built-ins sweep stale temporaries there).
    """

    def __init__(self, handlers: Iterable[Handler] = (), starts: Iterable[StartFn] = ()
                 ) -> None:
        self._by_kind: dict[str, Handler] = {}
        for h in handlers:
            self.add(h)
        # Run once per worker process after it reached Redis, before the first job
        # (the built-ins sweep stale temporaries of the tickets directory).
        self.starts: list[StartFn] = list(starts)

    def on_start(self, fn: StartFn) -> StartFn:
        if fn not in self.starts:
            self.starts.append(fn)
        return fn

    def add(self, handler: Handler) -> None:
        self._by_kind[handler.kind] = handler

    def register(self, kind: str, *, timeout: float | None = None
                 ) -> Callable[[HandlerFn], HandlerFn]:
        def deco(fn: HandlerFn) -> HandlerFn:
            self.add(Handler(kind, fn, timeout))
            return fn
        return deco

    def get(self, kind: str) -> Handler:
        return self._by_kind[kind]

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self._by_kind)

    def merged(self, other: Registry) -> Registry:
        return Registry([*self, *other], [*self.starts, *other.starts])

    def __iter__(self) -> Iterator[Handler]:
        return iter(self._by_kind.values())

    def __len__(self) -> int:
        return len(self._by_kind)


def handler(kind: str, *, timeout: float | None = None) -> Callable[[HandlerFn], HandlerFn]:
    """Mark a plain function as the handler of `kind`, for `module:function` specs."""
    def deco(fn: HandlerFn) -> HandlerFn:
        fn.__stagedoor_handler__ = Handler(kind, fn, timeout)  # type: ignore[attr-defined]
        return fn
    return deco
