"""The render process's rules, as plain functions of numbers: no clock, no OS calls, no
asyncio.

render_host.py measures (monotonic time, the process's exit status, what runstate.py
reads of a process that had no reply in time), asks here what that means, and acts
(exec, SIGKILL, a render failed or run again alone).  So each rule is pinned on its own
(tests/tickets/test_render_rules.py), beside the tests that show the host applies them to a real
process (tests/tickets/test_render_abort.py, test_render_stale.py, test_render_frozen.py).

- starts: a process that dies before it is ready is started again after START's backoff
  (0.1 s doubling to 5 s, no jitter); after START_ATTEMPTS such starts in a row the
  renders waiting fail as transient (gives_up_starting); the backoff starts over after a
  verdict or a process that lived SHORT_LIFE (backoff_starts_over);
- culprits: the renders in flight in a process that died are suspects, run again one at
  a time, each alone.  A process that dies with one render alone in it was killed by
  that render, unless it was its first SIGKILL (someone's kill -9, the OOM killer): then
  it runs alone once more (died_alone);
- hangs: the oldest render in flight with no reply for render_timeout (overdue) gets
  its process killed; that is a verdict only when it was the one render left in the
  process (judged): hung (Next.CULPRIT; renders of the same order waiting fail with it)
  or, when the process was not running then, a stall (stalled_alone);
- the watch's own lateness: a tick more than LOOP_LATE late (the worker itself was
  stopped, frozen or starved) gives every render in flight render_timeout again.

Shared with the supervisor's rules (supervisor/decisions.py), where the rule is the same:
the watch's lateness is decisions.loop_lateness (a watcher back later than it asked by
more than a margin stalled itself, and that time is charged to nobody it watches; the
margin is this module's), and a death by a signal is named by decisions.signal_name.
Not shared, because the rules differ: the backoff's numbers and when it starts over
(here a process that lived 1 s since its exec; a worker slot, 30 s after READY or a job
handled), and what a stall forgives (a render gets its whole render_timeout again; a
worker's silence is moved on by the stall only).  Both take their delays from backoff.py.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TypeVar

from ..backoff import Schedule
from ..supervisor.decisions import loop_lateness, signal_name

START = Schedule(0.1, 5.0, jitter=False)     # a failed start again after 0.1 s .. 5 s
START_ATTEMPTS = 3      # starts in a row that failed before waiting renders fail
SHORT_LIFE = 1.0        # s: a process that died sooner after its start counts for the backoff
STALLS = 3              # times a render's process was found not running while it ran alone
LOOP_LATE = 2.0         # s a watch tick may come late before the worker itself counts as stalled
WATCH_TICK = 1.0        # s between the watch's looks at the renders in flight, at most

T = TypeVar("T")


class Next(enum.Enum):
    """What becomes of a render that was alone in a process that died or was killed."""

    AGAIN = "again"             # alone again in a fresh process: no verdict yet
    CULPRIT = "culprit"         # the order's error (RenderFailed): dead-lettered
    TRANSIENT = "transient"     # a TransientError: retried by the worker's policy


# -- starts ----------------------------------------------------------------------------

def gives_up_starting(failed_starts: int) -> bool:
    """The renders waiting fail (as transient) after this many failed starts in a row;
    the next render tries again once the backoff has passed."""
    return failed_starts >= START_ATTEMPTS


def backoff_starts_over(explained: bool, lived: float) -> bool:
    """After a process's end: whether the start backoff starts over.  explained: its
    death was a render's verdict (the render was the cause, not the process); lived:
    seconds from its start to its end."""
    return explained or lived >= SHORT_LIFE


# -- culprits --------------------------------------------------------------------------

def death(rc: int) -> str:
    """How a process's end is named: 'SIGABRT', 'signal 70', 'exit status 1'."""
    return signal_name(-rc) if rc < 0 else f"exit status {rc}"


def died_alone(how: str, kills_before: int) -> Next:
    """The process died (`how`, as death() names it) with one render alone in it, which
    had died alone of SIGKILL `kills_before` times already.  A SIGKILL may have been
    someone else's, so the first one gets one more run: no order costs more than three
    deaths (the one with others in flight, and two alone)."""
    return Next.AGAIN if how == "SIGKILL" and kills_before == 0 else Next.CULPRIT


# -- hangs -----------------------------------------------------------------------------

def watch_tick(hang_after: float) -> float:
    """Seconds between the watch's looks: a second, or a quarter of render_timeout when
    that is shorter, so a hang is found soon after it is one."""
    return min(WATCH_TICK, hang_after / 4)


def watch_lateness(gap: float, tick: float) -> float:
    """How long the watch itself did not run (0: the usual jitter): `gap` seconds since
    its last look, when it asked for `tick`.  Non-zero: every render in flight gets
    render_timeout again from now."""
    return loop_lateness(gap, tick, after=LOOP_LATE)


def overdue(now: float, sent: float, hang_after: float) -> bool:
    """A render sent at `sent` with no reply by `now` is taken as hung."""
    return now - sent > hang_after


def judged(unresolved: Sequence[T], hung: T | None) -> bool:
    """A render found hung is judged (hung or stalled) only when it was the one render
    left unresolved in the process that was killed for it; otherwise every render left
    is a suspect, run again alone."""
    return hung is not None and list(unresolved) == [hung]


def stalled_alone(stalls: int) -> Next:
    """The process was killed with one render alone in it and found not running then
    (stopped, frozen, idle: runstate.py), `stalls` times so far counting this one: no
    verdict on the render; after STALLS of them it fails as transient, not as hung."""
    return Next.TRANSIENT if stalls >= STALLS else Next.AGAIN
