"""ReplyWait (worker/_entries.pyx, used by worker/readahead.py): the read-ahead turns the
event loop for a due reply only while most replies come within the turns; on a real
uvloop.  Each test runs on the C wait (what the worker runs) and on its executable
specification in Python (tests/support/readahead_spec.py, PyReplyWait)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from stagedoor.worker import entries
from tests.support.readahead_spec import PyReplyWait

WAITS = {"c": entries.ReplyWait, "python": PyReplyWait}
ReplyWait = PyReplyWait  # the constants (the C wait has the same; checked below)


@pytest.fixture(params=["c", "python"])
def make(request: pytest.FixtureRequest) -> type:
    wait_type = WAITS[request.param]
    for name in ("MOST", "LIMIT", "COOL", "COOL_MOST", "WINDOW", "NEAR_MIN"):
        assert getattr(wait_type, name) == getattr(ReplyWait, name), name
    return wait_type  # type: ignore[no-any-return]


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_replies_within_a_few_turns_keep_the_loop_turning(make: type) -> None:
    async def main() -> ReplyWait:
        wait = make(asyncio.get_running_loop())
        for _ in range(50):
            wait.due()
            await _turns(2)  # the reply comes two turns later
            assert wait.spinning
            wait.arrived()
        return wait

    wait = uvloop.run(main())
    assert not wait.spinning and wait.missed == 0 and wait.budget == ReplyWait.MOST


async def _late(wait: ReplyWait, n: int) -> list[int]:
    """n waits whose replies come after every turn was spent; the budgets after each."""
    budgets = []
    for _ in range(n):
        wait.due()
        await _turns(ReplyWait.MOST + 3)
        assert not wait.spinning
        wait.arrived()
        budgets.append(wait.budget)
    return budgets


def _misses_to_give_up(missed: float) -> int:
    """Waits in a row that run out of turns before the share of misses (an average over
    about the last 8) passes ReplyWait.LIMIT, from `missed`."""
    k = 0
    while missed <= ReplyWait.LIMIT:
        missed += (1 - missed) / 8
        k += 1
    return k


def test_late_replies_stop_the_turning_and_it_is_tried_again_later(make: type) -> None:
    k = _misses_to_give_up(0.0)
    assert 8 <= k <= 12  # three in four of the last ~8 waits

    async def main() -> None:
        wait = make(asyncio.get_running_loop())
        budgets = await _late(wait, k + 2)
        # three in four of the recent waits missed: plain waiting
        assert budgets[:k - 1] == [ReplyWait.MOST] * (k - 1), budgets
        assert budgets[k - 1:] == [0, 0, 0], budgets
        assert wait.cooldown == ReplyWait.COOL - 3 and wait.backoff == 2 * ReplyWait.COOL
        wait.due()  # plain waiting: no turn asked for
        assert not wait.spinning
        for _ in range(wait.cooldown):
            wait.arrived()
        assert wait.budget == ReplyWait.MOST  # tried again
        # still late: plain waiting again sooner (from the try's share), twice as long
        budgets = await _late(wait, _misses_to_give_up(ReplyWait.LIMIT / 2))
        assert budgets[-1] == 0 and wait.backoff == 4 * ReplyWait.COOL, budgets

    uvloop.run(main())


def test_replies_that_are_always_in_already_stop_the_turning(make: type) -> None:
    """Redis and the worker on one core: a reply is either in when it is due (epoll
    would not sleep for it) or comes only once the worker sleeps; the turns never save
    a sleep, so after a WINDOW of such waits the wait sleeps, then tries again."""
    async def main() -> None:
        wait = make(asyncio.get_running_loop())
        for i in range(ReplyWait.WINDOW):
            assert wait.budget == ReplyWait.MOST, i
            wait.due()
            await _turns(1)  # the reply is read in the first turn
            assert wait.spinning
            wait.arrived()
        assert wait.budget == 0 and wait.cooldown == ReplyWait.COOL
        assert (wait.n_present, wait.n_near) == (ReplyWait.WINDOW, 0)
        for _ in range(ReplyWait.COOL):
            wait.due()
            assert not wait.spinning  # plain waiting: no turn asked for
            wait.arrived()
        assert wait.budget == ReplyWait.MOST and wait.n_slept == ReplyWait.COOL

        # a window where the turns pay (a reply two turns late now and then) keeps them
        for i in range(ReplyWait.WINDOW):
            wait.due()
            await _turns(2 if i % 16 == 0 else 1)
            wait.arrived()
        assert wait.budget == ReplyWait.MOST and wait.n_near == ReplyWait.WINDOW // 16
        assert wait.backoff == ReplyWait.COOL  # the turns paid: the next sleep is short

    uvloop.run(main())
