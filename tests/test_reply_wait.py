"""ReplyWait (worker/readahead.py): the read-ahead turns the event loop for a due reply
only while most replies come within the turns; on a real uvloop."""

from __future__ import annotations

import asyncio

import uvloop

from stagedoor.worker.readahead import ReplyWait


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_replies_within_a_few_turns_keep_the_loop_turning() -> None:
    async def main() -> ReplyWait:
        wait = ReplyWait(asyncio.get_running_loop())
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


def test_late_replies_stop_the_turning_and_it_is_tried_again_later() -> None:
    async def main() -> None:
        wait = ReplyWait(asyncio.get_running_loop())
        budgets = await _late(wait, 8)
        # more than half of the recent waits missed after 6 in a row: plain waiting
        assert budgets[:5] == [ReplyWait.MOST] * 5 and budgets[5:] == [0, 0, 0], budgets
        assert wait.cooldown == ReplyWait.COOL - 3 and wait.backoff == 2 * ReplyWait.COOL
        wait.due()  # plain waiting: no turn asked for
        assert not wait.spinning
        for _ in range(wait.cooldown):
            wait.arrived()
        assert wait.budget == ReplyWait.MOST  # tried again
        budgets = await _late(wait, 5)  # still late: plain waiting again, twice as long
        assert budgets[-1] == 0 and wait.backoff == 4 * ReplyWait.COOL, budgets

    uvloop.run(main())
