"""The backlog and the trimmed-unread audit with a stale entries-read, for a user that
may not repair it (the worker's and the producer's ACL refuse XGROUP SETID).

A stale counter is what a promoted Redis 7.0 replica has (tests/faults/
test_failover_counts.py makes it with real failovers); here it is set directly on
the suite's server (XGROUP SETID ... ENTRIESREAD, as the default user), so that the
audit and the producer's enqueue run as the documented worker user of
docs/security.md: they must count the stream instead, never call the stale excess a
loss, and still count exactly the jobs a foreign producer trims unread afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.stream import connection
from stagedoor.stream.backlog import AUDIT_LUA, AUDIT_SCAN_CAP, trimmed_key
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import BacklogFull, enqueue_sync
from stagedoor.telemetry.inspect import queue_status
from tests.support.aclmode import PASSWORD, USER, acl_rules


@pytest.fixture
def worker_user(sync_redis: redis.Redis, settings: Settings) -> Iterator[redis.Redis]:
    sync_redis.execute_command("ACL", "SETUSER", USER, *acl_rules().split())
    kwargs = sync_redis.connection_pool.connection_kwargs
    client = redis.Redis(host=kwargs["host"], port=kwargs["port"], username=USER,
                         password=PASSWORD, protocol=2, socket_timeout=5)
    try:
        yield client
    finally:
        client.close()


def _add(client: redis.Redis, s: Settings, first: int, n: int) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(first, first + n):
        pipe.execute_command("XADD", s.stream, "*", *make_job("refund", i, i, "r", "t").fields())
    pipe.execute()


def test_a_stale_counter_without_setid_rights_is_counted_not_called_lost(
        sync_redis: redis.Redis, worker_user: redis.Redis, settings: Settings) -> None:
    s = settings.replace(maxlen=1200)  # refuses above 1140
    admin = sync_redis
    admin.execute_command("XGROUP", "CREATE", s.stream, s.group, "$", "MKSTREAM",
                          "ENTRIESREAD", 0)
    _add(admin, s, 1, 1000)
    got = admin.xreadgroup(s.group, "c", {s.stream: ">"}, count=1000)
    admin.xack(s.stream, s.group, *[eid for eid, _ in got[0][1]])
    cursor = admin.xinfo_groups(s.stream)[0]["last-delivered-id"]
    # What a promoted Redis 7.0 replica has: the cursor, with entries-read of long ago.
    admin.execute_command("XGROUP", "SETID", s.stream, s.group, cursor, "ENTRIESREAD", 0)

    audit = worker_user.register_script(AUDIT_LUA)
    args = [s.group, trimmed_key(s), 0, AUDIT_SCAN_CAP]
    assert [int(x) for x in audit(keys=[s.stream], args=args)] == [0, 0, 0]
    assert admin.xinfo_groups(s.stream)[0]["entries-read"] == 0  # refused: not repaired
    # The producer, as the worker user too: an empty queue takes jobs (before the fix:
    # BacklogFull, "backlog of jobs is 1000 entries").
    enqueue_sync(worker_user, s, [make_job("refund", 2000, 2000, "r", "t")])
    admin.xack(s.stream, s.group, *[eid for eid, _ in admin.xreadgroup(
        s.group, "c", {s.stream: ">"}, count=10)[0][1]])
    assert [int(x) for x in audit(keys=[s.stream], args=args)] == [0, 0, 0]
    st = queue_status(connection.sync_client(s), s)
    assert st["undelivered"] == 0 and st["trimmed_backlog"]["alarm"] is False, st

    # A real loss after it: 500 jobs by a foreign producer, trimmed to the last 100.
    _add(admin, s, 3000, 500)
    admin.execute_command("XTRIM", s.stream, "MAXLEN", 100)
    found = [int(audit(keys=[s.stream], args=args)[1]) for _ in range(2)]
    assert found == [400, 0]  # exact and once (the stale counter alone says 1400)
    assert int(admin.hget(trimmed_key(s), "count") or 0) == 400
    st = queue_status(connection.sync_client(s), s)
    assert st["trimmed_backlog"]["alarm"] is True
    assert st["trimmed_backlog"]["undelivered_trimmed"] == 400, st["trimmed_backlog"]
    assert st["undelivered"] == 100


def _stale_group(admin: redis.Redis, s: Settings, added: int, read: int) -> None:
    """A group that read `read` of `added` entries, with the counter of a promoted
    Redis 7.0 replica that had copied it before any read (0)."""
    admin.execute_command("XGROUP", "CREATE", s.stream, s.group, "$", "MKSTREAM",
                          "ENTRIESREAD", 0)
    _add(admin, s, 1, added)
    left = read
    while left:
        got = admin.xreadgroup(s.group, "c", {s.stream: ">"}, count=min(left, 1000))
        admin.xack(s.stream, s.group, *[eid for eid, _ in got[0][1]])
        left -= len(got[0][1])
    _make_stale(admin, s)


def _make_stale(admin: redis.Redis, s: Settings) -> None:
    cursor = admin.xinfo_groups(s.stream)[0]["last-delivered-id"]
    admin.execute_command("XGROUP", "SETID", s.stream, s.group, cursor, "ENTRIESREAD", 0)


def test_the_exact_count_pages_through_the_shorter_side_of_the_cursor(
        sync_redis: redis.Redis, worker_user: redis.Redis, settings: Settings) -> None:
    admin = sync_redis
    s = settings.replace(maxlen=5200, wait_replicas=0)  # warns from 4160, refuses above 4940
    _stale_group(admin, s, 5000, 50)  # 4950 undelivered, the counter says 5000
    audit = worker_user.register_script(AUDIT_LUA)
    args = [s.group, trimmed_key(s), 0, AUDIT_SCAN_CAP]
    # 50 entries before the cursor: counted from that side, exact, within the cap.
    assert [int(x) for x in audit(keys=[s.stream], args=args)] == [4950, 0, 0]

    admin.delete(s.stream, trimmed_key(s))
    _stale_group(admin, s, 5000, 3000)  # 2000 undelivered, the counter says 5000
    # Both sides hold more than the audit may read: the estimate stands (an upper bound).
    assert [int(x) for x in audit(keys=[s.stream], args=args)] == [5000, 0, 0]
    # A refusal is checked on the whole stream: the worker user's enqueue goes in
    # (before the fix: BacklogFull at "5000 entries"), the counter left as it was ...
    enqueue_sync(worker_user, s, [make_job("refund", 9001, 9001, "r", "t")])
    assert admin.xinfo_groups(s.stream)[0]["entries-read"] == 0
    assert admin.hget(trimmed_key(s), "setid_refused:enqueue") == b"1"  # asked once
    # ... and a user that may repairs it, same cursor, once told to ask again (the
    # documented HDEL): later estimates are exact and cheap.
    admin.hdel(trimmed_key(s), "setid_refused:enqueue")
    cursor = admin.xinfo_groups(s.stream)[0]["last-delivered-id"]
    enqueue_sync(admin, s, [make_job("refund", 9002, 9002, "r", "t")])
    (group,) = admin.xinfo_groups(s.stream)
    assert group["entries-read"] == 3000 and group["last-delivered-id"] == cursor
    assert group["lag"] == 2002
    assert [int(x) for x in audit(keys=[s.stream], args=args)] == [2002, 0, 0]
    # A backlog that really is at the refusal level is still refused.
    with pytest.raises(BacklogFull):
        enqueue_sync(admin, s, [make_job("refund", 10_000 + i, 1, "r", "t")
                                for i in range(3000)])
