"""Testing a handler: the pure parts directly, the handler in a real worker.

The end-to-end test is the pattern docs/handlers.md recommends: a redis-server of the
test's own on a free loopback port, orders in the store, jobs queued with
`stagedoor enqueue` (which refuses kinds the workers do not know), then
`stagedoor work --burst` with this package's registry, which handles everything
queued and exits; then look at what the handler did, the dead letters and the logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from receipts.handlers import customer_tier, format_receipt

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import EmbeddedRedis
from stagedoor.demo.orders import demo_order
from stagedoor.tickets.orders import put_orders_sync

HERE = Path(__file__).resolve().parents[1]
REGISTRY = "receipts.handlers:registry"


def test_format_receipt() -> None:
    order = demo_order(4471)
    text = format_receipt(order)
    assert text.startswith("Receipt for order 4471\n\n")
    assert len(text.splitlines()) == 2 + len(order.tickets) + 2  # head, tickets, total
    assert text.splitlines()[-1].startswith("Total ")
    assert customer_tier(order) in ("gold", "standard")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path / "redis") as s:
        yield s


def stagedoor(*args: str, url: str, env: dict[str, str], stdin: str = ""
              ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
    full.update(env, STAGEDOOR_REDIS_URL=url, STAGEDOOR_HANDLERS=REGISTRY,
                PYTHONPATH=os.pathsep.join([str(HERE / "src"), *sys.path]))
    return subprocess.run([sys.executable, "-m", "stagedoor", *args], input=stdin, env=full,
                          capture_output=True, text=True, timeout=120)


def test_receipts_end_to_end(server: EmbeddedRedis, tmp_path: Path) -> None:
    settings = Settings(redis_url=server.url)
    client = redis.Redis.from_url(server.url, protocol=2)
    try:
        put_orders_sync(client, settings, [demo_order(n) for n in (101, 102, 103)])
        trace = "00-" + "4bf92f3577b34da6a3ce929d0e0e4736" + "-00f067aa0ba902b7-01"
        jobs = [{"kind": "send_receipt", "order_id": n, "outbox_id": 9000 + n,
                 "request_id": f"req-{n}", "trace": trace} for n in (101, 102, 103)]
        jobs.append({"kind": "send_receipt", "order_id": 999, "outbox_id": 9999,
                     "request_id": "req-missing", "trace": trace})  # no such order
        env = {"RECEIPTS_DIR": str(tmp_path / "receipts")}
        lines = "".join(json.dumps(j) + "\n" for j in jobs)
        r = stagedoor("enqueue", "--file", "-", url=server.url, env=env, stdin=lines)
        assert r.returncode == 0, r.stderr
        r = stagedoor("enqueue", "--kind", "send_reciept", "--order-id", "1", "--outbox-id",
                      "1", url=server.url, env=env)  # a typo is refused at the producer
        assert r.returncode == 65 and "unknown kind 'send_reciept'" in r.stderr

        r = stagedoor("work", "--burst", "--log-format", "json", url=server.url, env=env)
        assert r.returncode == 0, r.stderr
        receipts = sorted(p.name for p in (tmp_path / "receipts").iterdir())
        assert receipts == ["receipt-101.txt", "receipt-102.txt", "receipt-103.txt"]
        assert (tmp_path / "receipts" / "receipt-102.txt").read_text() == format_receipt(
            demo_order(102))

        dead = client.xrange("jobs:dead")
        assert len(dead) == 1
        assert dead[0][1][b"dead:error"] == (b"permanent error: PermanentError: order 999 is "
                                             b"not in the store")

        logs = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
        written = [d for d in logs if d["msg"] == "receipt written"]
        assert sorted(d["request_id"] for d in written) == ["req-101", "req-102", "req-103"]
        for d in written:  # the job's fields, with no help from the handler, and its extras
            assert d["trace"] == trace and d["kind"] == "send_receipt"
            assert d["logger"] == "receipts.handlers" and d["customer_tier"] in (
                "gold", "standard")
            assert d["path"].endswith(f"receipt-{d['order_id']}.txt")

        # A duplicate of a handled job (the relay sent its outbox row twice) is skipped.
        dup = {"kind": "send_receipt", "order_id": 101, "outbox_id": 9101,
               "request_id": "req-dup", "trace": trace}
        (tmp_path / "receipts" / "receipt-101.txt").write_text("kept\n")
        r = stagedoor("enqueue", "--file", "-", url=server.url, env=env,
                      stdin=json.dumps(dup) + "\n")
        assert r.returncode == 0, r.stderr
        r = stagedoor("work", "--burst", "--log-format", "json", url=server.url, env=env)
        assert r.returncode == 0, r.stderr
        logs = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
        skipped = [d for d in logs if "already handled" in d["msg"]]
        assert [d["request_id"] for d in skipped] == ["req-dup"]
        assert (tmp_path / "receipts" / "receipt-101.txt").read_text() == "kept\n"
    finally:
        client.close()
