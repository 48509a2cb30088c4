"""Which servers copy a group's entries-read to a replica as reads happen (issue 24).

The backlog check, the lag and the trimmed-unread audit used to trust entries-read;
a replica promoted by a failover has the value of its last full resync if the server
does not replicate the counter on every XREADGROUP.  This test measures it on the
server SD_TEST_SERVER picks (a real master and replica, in sync, WAIT for the replica
to have every write): the table in docs/scaling.md ("Failover and the group's
counters") is what it found, and it fails if a server behaves otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.aclmode import server_args
from tests.support.servers import SERVER, SuiteRedis
from tests.support.topology import REPL_NOW
from tests.support.worker import poll

pytestmark = pytest.mark.server

# server (SD_TEST_SERVER) -> does the replica's entries-read follow XREADGROUP?
# Measured here: docs/scaling.md has the same table.
REPLICATES_ON_READ = {"redis": False, "valkey": True, "redis8": True}


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    master = SuiteRedis(tmp_path / "master", extra_args=[*server_args(), *REPL_NOW]).start()
    replica = SuiteRedis(tmp_path / "replica", extra_args=[
        *server_args(), "--replicaof", "127.0.0.1", str(master.port)]).start()
    m = redis.Redis(port=master.port, protocol=2, socket_timeout=5)
    r = redis.Redis(port=replica.port, protocol=2, socket_timeout=5)
    try:
        poll(lambda: r.info("replication").get("master_link_status") == "up", 20,
             "the replica in sync")
        yield m, r
    finally:
        m.close()
        r.close()
        replica.stop()
        master.stop()


def _entries_read(client: redis.Redis) -> int | None:
    (group,) = client.xinfo_groups("jobs")
    value = group.get("entries-read")
    return None if value is None else int(value)


def test_replica_entries_read_after_reads(pair: tuple[redis.Redis, redis.Redis]) -> None:
    m, r = pair
    # As stagedoor's producer creates it: a valid counter from the start.
    m.execute_command("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM",
                      "ENTRIESREAD", 0)
    for i in range(55):
        m.xadd("jobs", {"n": i})
    for _ in range(5):  # the workers' reads: XREADGROUP COUNT 11, five times
        m.xreadgroup("workers", "c", {"jobs": ">"}, count=11)
    assert int(m.execute_command("WAIT", 1, 5000)) == 1  # the replica has every write
    on_master, on_replica = _entries_read(m), _entries_read(r)
    last_master = m.xinfo_groups("jobs")[0]["last-delivered-id"]
    last_replica = r.xinfo_groups("jobs")[0]["last-delivered-id"]
    print(f"\n{SERVER.describe()}: entries-read master {on_master}, replica {on_replica}; "
          f"last-delivered-id master {last_master!r}, replica {last_replica!r}")
    assert on_master == 55
    assert last_replica == last_master  # the cursor is replicated on every server
    replicates = on_replica == on_master
    assert replicates == REPLICATES_ON_READ[SERVER.name], (
        f"{SERVER.describe()}: replica entries-read {on_replica} against the master's "
        f"{on_master}: update REPLICATES_ON_READ and the table in docs/scaling.md")
