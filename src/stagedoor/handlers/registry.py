"""The handler registry: kind -> async handler, extendable from `module:attr`.

A plugin attr may be a Registry, a mapping of kind -> handler function, or a
single function registered with `@handler("kind")`.  A bad spec is a ConfigError
(exit 78), raised when the worker boots, so the supervisor reports a boot failure
instead of a pool that crashes on the first job.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import ConfigError

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
    registration of a kind replaces an earlier one; see load_registry).  An entry of a
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


def _as_registry(spec: str, obj: Any) -> Registry:
    if isinstance(obj, Registry):
        return obj
    marked = getattr(obj, "__stagedoor_handler__", None)
    if isinstance(marked, Handler):
        return Registry([marked])
    if isinstance(obj, Mapping) and all(callable(v) for v in obj.values()):
        return Registry(Handler(str(k), v) for k, v in obj.items())
    raise ConfigError(f"handlers: {spec!r} is not a Registry, a kind->handler mapping or a "
                      f"function marked with @handler")


def load_spec(spec: str) -> Registry:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise ConfigError(f"handlers: cannot import {module_name!r}: "
                          f"{type(e).__name__}: {e}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"handlers: module {module_name!r} has no {attr!r}") from None
    return _as_registry(spec, obj)


def load_registry(specs: Iterable[str] = (), *, builtin: bool = True) -> Registry:
    """The built-in handlers, then each spec in order (a later kind replaces an earlier)."""
    registry = Registry()
    if builtin:
        from .tickets import registry as tickets

        registry = registry.merged(tickets)
    for spec in specs:
        registry = registry.merged(load_spec(spec))
    return registry
