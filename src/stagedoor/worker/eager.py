"""Start a job's coroutine eagerly; make a Task only if it suspends.

A Task per job costs the loop a Task object, a scheduled first step, a step through
the loop and a done callback, a large share of a short job
(docs/benchmarks.md, "Why the code is the way it is").
Most jobs of a fast kind finish without ever waiting, so `start` runs the coroutine
right away, in the dispatching code, up to its first suspension (`coro.send(None)`,
what Python 3.12's eager task factory does; 3.11 has none).  If it finished, no Task
was made.  If it suspended, a Task takes over from that point (`_resume` hands the
future it waits on to the Task and drives the coroutine on).

While it runs eagerly, the coroutine must see what a task would:
- `asyncio.current_task()` is an `EagerRun`, not the dispatching task: a handler's
  `asyncio.timeout()` or TaskGroup, or the worker's own deadline sweeper, that
  cancels "the current task" cancels this job and never the consume loop.  Once the
  Task exists the EagerRun forwards cancel/uncancel/cancelling to it (a handler that
  keeps the object it got keeps working).
- contextvars: it runs in a copy of the dispatcher's context, which the Task then
  keeps, so a context variable a handler sets stays with its job (as with a Task).

Written by hand because the standard library has it only from 3.12 on
(asyncio.eager_task_factory), and uvloop's loop has no eager start either.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from asyncio.tasks import _enter_task, _leave_task
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any


class EagerRun:
    """current_task() during an eager start; afterwards a handle on the Task, if any."""

    __slots__ = ("_cancel", "name", "task")

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.task: asyncio.Task[Any] | None = None
        self._cancel: tuple[Any, ...] | None = None

    def bind(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        if self._cancel is not None:  # asked for while it ran eagerly
            task.cancel(*self._cancel)

    def cancel(self, msg: Any = None) -> bool:
        if self.task is not None:
            return self.task.cancel(msg)
        self._cancel = (msg,)
        return True

    def cancelling(self) -> int:
        if self.task is not None:
            return self.task.cancelling()
        return 1 if self._cancel is not None else 0

    def uncancel(self) -> int:
        if self.task is not None:
            return self.task.uncancel()
        self._cancel = None
        return 0

    def done(self) -> bool:
        return self.task.done() if self.task is not None else False

    def get_name(self) -> str:
        return self.task.get_name() if self.task is not None else self.name


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], first: Any) -> Generator[Any, Any, Any]:
    """Go on with a coroutine that already yielded `first` (what `await coro` would do)."""
    value = first
    while True:
        try:
            sent = yield value
        except BaseException as exc:  # a cancellation thrown in by the Task
            try:
                value = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                value = coro.send(sent)
            except StopIteration as stop:
                return stop.value


async def raising(error: BaseException) -> None:
    """An awaitable that raises `error`: a first attempt that failed before it waited."""
    raise error


def resume(coro: Coroutine[Any, Any, Any], first: Any) -> Awaitable[Any]:
    """An awaitable that goes on with `coro`, which already yielded `first`."""
    return _resume(coro, first)


def start(coro: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop,
          run: EagerRun, outer: asyncio.Task[Any] | None,
          context: contextvars.Context | None = None) -> asyncio.Task[None] | None:
    """Run `coro` now until it first suspends: None if it finished, else its Task.

    `run` is what asyncio.current_task() returns meanwhile; it is bound to the Task.
    `outer` is the current task of the caller (asyncio.current_task(loop)), put back
    afterwards; None when the caller has left it already.  `context`: the job's own
    copy of the context, if it has one already (default: a copy of the current one).
    Whatever the coroutine raises propagates (handlers catch their own)."""
    if context is None:
        context = contextvars.copy_context()
    if outer is not None:
        _leave_task(loop, outer)
    _enter_task(loop, run)  # type: ignore[arg-type]
    try:
        first = context.run(coro.send, None)
    except StopIteration:
        return None
    except asyncio.CancelledError:
        # What a Task would do with it: end cancelled, and nobody is told.  (Nothing can
        # have cancelled a coroutine that never waited; this is one raising it itself.)
        return None
    finally:
        _leave_task(loop, run)  # type: ignore[arg-type]
        if outer is not None:
            _enter_task(loop, outer)
    task: asyncio.Task[None] = loop.create_task(_resume(coro, first), context=context)
    run.bind(task)
    return task
