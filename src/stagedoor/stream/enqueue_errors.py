"""What a producer raises when not every job went in: EnqueueError and its kinds.

Each carries `ids`, the jobs that did go in (in order: jobs[:len(ids)]), so a caller
resumes after the last one; `unknown` says how many after them may have gone in too
(sent, no answer read).  The producer (producer.py) decides which one applies.
"""

from __future__ import annotations

import redis

from ..config import Settings
from ..errors import StagedoorError


class EnqueueError(StagedoorError, RuntimeError):
    """Not every job went in.  `ids` are those that did (in order: jobs[:len(ids)]),
    so the caller can resume after the last one; the message is one line.

    `unknown`: the jobs after those whose fate nobody knows: their request was sent and
    Redis did not answer (a timeout, a connection lost while reading), so they may be
    on the stream.  Send them again: handlers dedupe on outbox_id."""

    def __init__(self, message: str, ids: list[str], total: int, *, unknown: int = 0) -> None:
        super().__init__(message)
        self.ids = ids
        self.total = total
        self.unknown = unknown

    @property
    def progress(self) -> str:
        return _progress(self.ids, self.total, self.unknown)


def _progress(ids: list[str], total: int, unknown: int = 0) -> str:
    """'N of M jobs went in, last id X', and the jobs that may have gone in too."""
    last = f", last id {ids[-1]}" if ids else ""
    text = f"{len(ids)} of {total} jobs went in{last}"
    if unknown:
        text += (f"; the next {unknown} may have gone in too (sent, and Redis did not "
                 f"answer): send them again, deduped by outbox_id")
    return text


class BacklogFull(EnqueueError):
    """The group's backlog reached backlog_refuse_fraction of maxlen: adding more would
    let MAXLEN ~ trim jobs no worker has read.  Retry when the workers caught up."""

    def __init__(self, message: str, ids: list[str], total: int, *, backlog: int,
                 limit: int) -> None:
        super().__init__(message, ids, total)
        self.backlog = backlog
        self.limit = limit


class NotReplicated(EnqueueError, redis.ConnectionError):
    """WAIT returned fewer replicas than asked, or the master changed before WAIT could
    answer (`demoted`: the server's reply): the entries went in, but a failover may
    lose them.  Enqueue them again (handlers dedupe on outbox_id).

    `unread`: the last chunk's jobs that may have gone in although their ids were never
    read (redis-py's Sentinel connection raises a demoted master's answer to WAIT as a
    ConnectionError, without the script's reply); `ids` stop before them."""

    def __init__(self, ids: list[str], total: int, acked: int, settings: Settings, *,
                 demoted: str = "", unread: int = 0) -> None:
        if not demoted:
            why = (f"only {acked} of {settings.replicas_to_wait} replicas confirmed the "
                   f"jobs within {settings.wait_timeout_ms} ms (WAIT)")
        else:
            why = f"the master changed before WAIT confirmed the jobs ({demoted})"
        went = f"{len(ids)} of {total} jobs went in unconfirmed"
        if unread:
            went = (f"the last {unread} jobs may have gone in, unconfirmed (their ids were "
                    f"not read), {len(ids)} of {total} before them went in")
        message = (f"{why}; a failover may lose them: enqueue them again (deduped by "
                   f"outbox_id); {went}")
        super().__init__(message, ids, total)
        # EnqueueError's __init__ (RuntimeError's) comes first in the MRO and never runs
        # redis-py's, whose __repr__ needs what it sets (error_type): a repr of this error
        # (asyncio's of a task that raised it) raised AttributeError.
        redis.ConnectionError.__init__(self, message)
        self.acked, self.wanted = acked, settings.replicas_to_wait
        self.unread = unread


class RedisOutOfMemory(EnqueueError):
    """Redis answered OOM (maxmemory reached, noeviction): nothing more can be added."""
