"""worker/eager.py: a coroutine started eagerly behaves as it would in a Task of its own."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from stagedoor.worker import eager

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="outer")


def start(coro):  # type: ignore[no-untyped-def]
    run = eager.EagerRun()
    return run, eager.start(coro, asyncio.get_running_loop(), run, asyncio.current_task())


async def test_a_coroutine_that_never_waits_finishes_without_a_task() -> None:
    ran = []

    async def job() -> None:
        ran.append(asyncio.current_task())

    run, task = start(job())
    assert task is None
    assert ran == [run]  # current_task() was the stand-in, not this test's task


async def test_one_that_waits_goes_on_in_a_task_with_its_result_and_errors() -> None:
    async def job() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("late")

    run, task = start(job())
    assert task is not None and run.task is task
    with pytest.raises(ValueError, match="late"):
        await task


async def test_a_timeout_entered_eagerly_cancels_the_job_not_the_caller() -> None:
    async def job() -> None:
        async with asyncio.timeout(0.05):
            await asyncio.sleep(5)

    caller = asyncio.current_task()
    assert caller is not None
    _, task = start(job())
    assert task is not None
    with pytest.raises(TimeoutError):
        await task
    await asyncio.sleep(0.1)  # the caller would be cancelled here if the timer hit it
    assert caller.cancelling() == 0


async def test_cancel_through_the_stand_in_reaches_the_task() -> None:
    async def job() -> None:
        await asyncio.sleep(5)

    run, task = start(job())
    assert task is not None
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_context_variables_stay_with_the_job() -> None:
    seen = []

    async def job() -> None:
        VAR.set("job")
        await asyncio.sleep(0)
        seen.append(VAR.get())

    _, task = start(job())
    assert VAR.get() == "outer"  # not leaked into the dispatcher's context
    assert task is not None
    await task
    assert seen == ["job"]


async def test_the_callers_current_task_is_restored_also_after_an_error() -> None:
    async def job() -> None:
        raise KeyError("now")

    caller = asyncio.current_task()
    with pytest.raises(KeyError):
        start(job())
    assert asyncio.current_task() is caller


async def test_a_coroutine_raising_cancelled_error_at_once_ends_like_a_cancelled_task() -> None:
    async def job() -> None:
        raise asyncio.CancelledError

    caller = asyncio.current_task()
    _, task = start(job())
    assert task is None
    assert asyncio.current_task() is caller and caller is not None
    assert caller.cancelling() == 0
