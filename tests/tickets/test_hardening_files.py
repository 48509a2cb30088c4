"""Files and the order store under hostile data and bad disks (issue 12: #6-#9).

Real redis-server, real worker (in this test's loop), real filesystems: the disk
cases mount a small tmpfs (read-only, or filled to the brim) and unmount it; they
fail, never skip, when the mount is refused.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import redis

from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.errors import TransientError
from stagedoor.handlers import Registry, load_registry
from stagedoor.stream.job import Job, make_job
from stagedoor.stream.queue import enqueue_sync, ensure_group_sync
from stagedoor.tickets.orders import put_orders_sync
from tests.support.worker import add_jobs, dead_entries, eventually, pending_summary, running

FAST = {"block_ms": 100, "reclaim_interval": 0.05, "retry_backoff": 0.001,
        "retry_backoff_max": 0.01}


@contextlib.contextmanager
def tmpfs(path: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                             capture_output=True, text=True)
    assert mounted.returncode == 0, f"cannot mount a tmpfs (CI runs as root): {mounted.stderr}"
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def left_in(directory: str) -> list[str]:
    return os.listdir(directory) if os.path.isdir(directory) else []


def tmp_files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.endswith(".tmp")]


# -- #6: paths confined to the tickets directory ------------------------------------------


async def test_refund_never_deletes_a_file_outside_the_tickets_dir(
        settings: Settings, sync_redis: redis.Redis, tmp_path: Path) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("do not delete")
    os.makedirs(settings.tickets_dir)
    sneaky = Path(settings.tickets_dir) / ".." / "precious.txt"
    put_orders_sync(sync_redis, settings, [demo_order(5), demo_order(6)])
    sync_redis.hset(settings.key("order", 5), "rendered", str(victim))
    sync_redis.hset(settings.key("order", 6), "rendered", str(sneaky))
    ensure_group_sync(sync_redis, settings)
    add_jobs(settings, "refund", [5, 6])
    async with running(settings.replace(**FAST), load_registry()):
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 2, what="both refused")
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 0, what="acked")
    assert victim.read_text() == "do not delete"
    for dead in dead_entries(sync_redis, settings):
        assert b"outside the tickets directory" in dead[b"dead:error"], dead[b"dead:error"]
    assert sync_redis.hget(settings.key("order", 5), "status") == b"refunded"


async def test_refund_deletes_its_own_pdf_in_the_tickets_dir(
        settings: Settings, sync_redis: redis.Redis) -> None:
    put_orders_sync(sync_redis, settings, [demo_order(8)])
    add_jobs(settings, "render_tickets", [8])
    pdf = Path(settings.tickets_dir) / "order-8.pdf"
    async with running(settings.replace(**FAST), load_registry()) as w:
        await eventually(pdf.exists, what="rendered")
        enqueue_sync(sync_redis, settings, [make_job("refund", 8, 1008, "r", "t")])
        await eventually(lambda: w.stats.total("handled") == 2, what="refunded")
    assert not pdf.exists()
    assert sync_redis.xlen("jobs:dead") == 0


# -- #7: tmp files on a full disk ----------------------------------------------------------


async def test_full_disk_leaves_no_tmp_files_and_jobs_finish_once_space_is_back(
        settings: Settings, sync_redis: redis.Redis, tmp_path: Path) -> None:
    # Sized for the 30 demo orders' PDFs (~38 KB each since every glyph is embedded:
    # ~1.1 MB in all) to fit once the filler is gone.
    with tmpfs(tmp_path / "small", "4m") as disk:
        tickets = disk / "tickets"
        tickets.mkdir()
        # Stale temporaries of a killed worker (our naming) and a file that is not ours.
        # pid 4194305 is above the largest pid_max Linux allows: its writer is gone.
        stale = [tickets / f".order-{i}.pdf.4194305.{i}.tmp" for i in (1, 2)]
        for p in stale:
            p.write_bytes(b"%PDF-partial")
        foreign = tickets / "notes.tmp"
        foreign.write_text("not ours")
        filler = disk / "filler"
        # Leave ~60 KB: the first PDF fits, then writes fail half way (ENOSPC).
        filler.write_bytes(b"\0" * (4096 * 1024 - 60 * 1024))
        orders = [demo_order(i) for i in range(10, 40)]
        put_orders_sync(sync_redis, settings, orders)
        s = settings.replace(tickets_dir=str(tickets), claim_idle_ms=400, job_timeout=0.3,
                             retries=1, max_deliveries=50, **FAST)
        add_jobs(s, "render_tickets", range(10, 40))
        async with running(s, load_registry()) as w:
            await eventually(lambda: not any(p.exists() for p in stale), 5,
                             what="the startup sweep to remove our stale tmps")
            assert foreign.exists(), "and nothing that is not ours"
            await eventually(lambda: w.stats.total("retried") >= 5, what="ENOSPC retries")
        # The worker stopped: no write is in flight, so any tmp file now is a leak.
        leaked = [p for p in tmp_files(tickets) if p != foreign]
        assert not leaked, f"tmp files left on ENOSPC: {leaked}"
        assert sync_redis.xlen("jobs:dead") == 0, "ENOSPC is transient, never dead"
        filler.unlink()
        async with running(s, load_registry()):
            await eventually(lambda: all((tickets / f"order-{o.order_id}.pdf").exists()
                                         for o in orders), 30, what="all rendered")
            await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, 30, what="acked")
        assert [p for p in tmp_files(tickets) if p != foreign] == []
        assert sync_redis.xlen("jobs:dead") == 0


# -- #8: error classification ------------------------------------------------------------


async def test_read_only_tickets_dir_is_permanent_with_the_real_error(
        settings: Settings, sync_redis: redis.Redis, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "64k", read_only=True) as ro:
        put_orders_sync(sync_redis, settings, [demo_order(3)])
        # a time limit above the render process's start (~0.1-0.3 s: the first render
        # starts it), so that the one attempt ends with the write's error
        s = settings.replace(tickets_dir=str(ro), claim_idle_ms=3000, job_timeout=2.0, **FAST)
        add_jobs(s, "render_tickets", [3])
        async with running(s, load_registry()) as w:
            await eventually(lambda: sync_redis.xlen("jobs:dead") == 1, what="dead at once")
        [dead] = dead_entries(sync_redis, s)
        assert b"Read-only file system" in dead[b"dead:error"], dead[b"dead:error"]
        assert dead[b"dead:deliveries"] == b"1", "not retried for 6 deliveries"
        assert w.stats.total("retried") == 0


async def test_wrongtype_order_key_is_permanent_with_the_real_error(
        settings: Settings, sync_redis: redis.Redis) -> None:
    sync_redis.set(settings.key("order", 4), "not a hash")
    ensure_group_sync(sync_redis, settings)
    add_jobs(settings, "render_tickets", [4])
    async with running(settings.replace(claim_idle_ms=300, job_timeout=0.2, **FAST),
                       load_registry()):
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 1, what="dead at once")
    [dead] = dead_entries(sync_redis, settings)
    assert b"WRONGTYPE" in dead[b"dead:error"], dead[b"dead:error"]
    assert dead[b"dead:deliveries"] == b"1"


async def test_poison_reason_carries_the_last_real_error(
        settings: Settings, sync_redis: redis.Redis) -> None:
    reg = Registry()

    @reg.register("flaky")
    async def flaky(job: Job, ctx: object) -> None:
        raise TransientError("the payment service said 503")

    ensure_group_sync(sync_redis, settings)
    add_jobs(settings, "flaky", [1])
    s = settings.replace(max_deliveries=2, retries=0, claim_idle_ms=100, job_timeout=0.05,
                         **FAST)
    async with running(s, reg):
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 1, 20, what="poison")
    [dead] = dead_entries(sync_redis, s)
    assert dead[b"dead:error"].startswith(b"poison: "), dead[b"dead:error"]
    assert b"the payment service said 503" in dead[b"dead:error"], dead[b"dead:error"]


# -- #9: inconsistent orders --------------------------------------------------------------


async def render_refused(settings: Settings, sync_redis: redis.Redis, order_id: int,
                         data: bytes, status: str) -> bytes:
    """Store an order as given, run its render job; return the dead-letter reason."""
    sync_redis.hset(settings.key("order", order_id), mapping={"data": data, "status": status})
    ensure_group_sync(sync_redis, settings)
    add_jobs(settings, "render_tickets", [order_id])
    async with running(settings.replace(**FAST), load_registry()):
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 1, what="refused")
    [dead] = dead_entries(sync_redis, settings)
    assert not left_in(settings.tickets_dir), "nothing rendered, nothing left behind"
    return dead[b"dead:error"]


async def test_order_stored_under_another_id_is_refused(
        settings: Settings, sync_redis: redis.Redis) -> None:
    reason = await render_refused(settings, sync_redis, 115, demo_order(999).to_json(),
                                  "placed")
    assert b"stored under order 115 but its data is for order 999" in reason, reason


async def test_unknown_order_status_is_refused_not_rendered(
        settings: Settings, sync_redis: redis.Redis) -> None:
    reason = await render_refused(settings, sync_redis, 116, demo_order(116).to_json(),
                                  "shipped")
    assert b"unknown order status 'shipped'" in reason, reason
