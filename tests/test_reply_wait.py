"""ReplyWait (worker/readahead.py): the read-ahead turns the event loop for a due reply
only while that pays, learned from how many turns the replies took; on a real uvloop."""

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
    assert not wait.spinning and wait.misses == 0
    assert 4 <= wait.budget <= ReplyWait.START  # about twice the turns taken, at least 4


def test_late_replies_stop_the_turning_and_it_is_tried_again_later() -> None:
    async def main() -> list[int]:
        wait = ReplyWait(asyncio.get_running_loop())
        budgets = []
        for _ in range(ReplyWait.MISSES):
            wait.due()
            await _turns(ReplyWait.MOST + 5)  # every turn spent: a miss
            assert not wait.spinning
            wait.arrived()
            budgets.append(wait.budget)
        wait.due()  # turning stopped: due() asks for no turn
        assert not wait.spinning
        for _ in range(ReplyWait.COOLDOWN - 2):  # the last miss's reply was the first
            wait.arrived()
        budgets.append(wait.budget)
        wait.arrived()
        budgets.append(wait.budget)
        return budgets

    budgets = uvloop.run(main())
    assert budgets[ReplyWait.MISSES - 1] == 0, budgets  # plain waiting after the misses
    assert budgets[-2] == 0 and budgets[-1] == ReplyWait.START, budgets
