"""The stream as a queue: one import for its four parts, as before they were split.

    producer.py        enqueue, enqueue_many, enqueue_sync: one script per chunk with
                       the backlog check, WAIT under Sentinel, one plan for both clients
    groups.py          the consumer group: ensure_group(_sync), is_nogroup, is_busygroup
    enqueue_errors.py  EnqueueError, BacklogFull, NotReplicated, RedisOutOfMemory
    deadletter.py      the dead-letter format (dead_letter_fields, original_fields) and
                       the worker's dead-letter script (DeadLetter)

Every name that was importable from here still is (issue 40: split by role, every
import path kept).
"""

from __future__ import annotations

from .deadletter import (
    DEAD_FIELD_PREFIX,
    DEAD_META,
    DEAD_TRIM_READ,
    MAX_DEAD_FIELDS,
    DeadLetter,
    dead_letter_fields,
    original_fields,
)
from .enqueue_errors import BacklogFull, EnqueueError, NotReplicated, RedisOutOfMemory
from .groups import ensure_group, ensure_group_sync, group_create_args, is_busygroup, is_nogroup
from .job import Job
from .producer import (
    ENQUEUE_LUA,
    JOB_WIDTH,
    MASTER_TRIES,
    WARN_SCAN,
    backlog_limits,
    enqueue,
    enqueue_many,
    enqueue_sync,
    xadd_args,
)

__all__ = [
    "DEAD_FIELD_PREFIX", "DEAD_META", "DEAD_TRIM_READ", "ENQUEUE_LUA", "JOB_WIDTH",
    "MASTER_TRIES", "MAX_DEAD_FIELDS", "WARN_SCAN", "BacklogFull", "DeadLetter",
    "EnqueueError", "Job", "NotReplicated", "RedisOutOfMemory", "backlog_limits",
    "dead_letter_fields", "enqueue", "enqueue_many", "enqueue_sync", "ensure_group",
    "ensure_group_sync", "group_create_args", "is_busygroup", "is_nogroup",
    "original_fields", "xadd_args",
]
