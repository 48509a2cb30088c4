"""`stagedoor demo`: the whole product on one machine, end to end.

It plays the api's part (orders in the store, one render_tickets job per order, a
few refunds, one malformed payload to show the dead-letter stream), starts the real
supervisor with N workers as a child process, waits until the group has handled
everything, stops the supervisor with SIGTERM (the graceful path an operator uses)
and checks the PDFs it wrote.  With no redis_url it runs an embedded redis-server
under --state-dir, so nothing but this repository is needed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ... import config
from ...demo.embedded_redis import EmbeddedRedis
from ...demo.orders import demo_order, world_order
from ...exitcodes import EX_SOFTWARE
from ...stream import connection
from ...stream.job import Job, make_job
from ...stream.queue import enqueue_sync, ensure_group_sync
from ...tickets.orders import put_orders_sync


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="Run the supervisor on demo orders until drained.",
                       description="Put demo orders in the store and their jobs on the "
                       "stream, run `stagedoor-supervise` with --workers workers until "
                       "every job is handled, stop it gracefully and report. Uses an "
                       "embedded redis-server under --state-dir unless --redis-url (or "
                       "STAGEDOOR_REDIS_URL) is set.")
    p.add_argument("--orders", type=int, default=200, help="Demo orders. [default: 200]")
    p.add_argument("--refunds", type=int, default=10, help="How many of them are also "
                   "refunded (a refund job follows the render job). [default: 10]")
    p.add_argument("--timeout", type=float, default=300.0, help="Seconds to wait for the "
                   "drain before giving up. [default: 300]")
    config.add_arguments(p, only=["redis_url", "redis_password_file", "workers",
                                  "tickets_dir", "state_dir", "log_format", "log_level"])
    p.set_defaults(func=run)


def _queue_done(client: Any, settings: config.Settings) -> tuple[bool, int, int]:
    pending = int(client.execute_command("XPENDING", settings.stream, settings.group)[0])
    groups = client.execute_command("XINFO", "GROUPS", settings.stream)
    lag = 0
    for g in groups:
        info = dict(zip(g[::2], g[1::2], strict=False))
        if info.get(b"name") == settings.group.encode():
            lag = int(info.get(b"lag") or 0)
    return pending == 0 and lag == 0, pending, lag


def run(args: argparse.Namespace) -> int:
    settings = config.from_args(args)
    if args.orders < 1 or not 0 <= args.refunds <= args.orders:
        print("stagedoor demo: error: need --orders >= 1 and 0 <= --refunds <= --orders",
              file=sys.stderr)
        return 2
    state = Path(settings.state_dir).resolve()
    tickets = Path(settings.tickets_dir).resolve()
    server: EmbeddedRedis | None = None
    if not settings.redis_url:
        server = EmbeddedRedis(state / "redis", appendonly=True).start()
        settings = settings.replace(redis_url=server.url)
        print(f"demo: embedded redis-server on 127.0.0.1:{server.port} ({state / 'redis'})")
    try:
        return _run(args, settings, tickets)
    finally:
        if server is not None:
            server.stop()


_SCRIPTS_SEEN: set[str] = set()   # the locales of the non-Latin demo orders


def _seed(args: argparse.Namespace, settings: config.Settings, client: Any) -> int:
    run_id = int(time.time())
    base = run_id * 1000  # fresh order and outbox ids on every run
    # two in three Latin, the third in one of the sample scripts (demo/scripts/)
    orders = [world_order(base + i) if i % 3 == 2 else demo_order(base + i)
              for i in range(args.orders)]
    _SCRIPTS_SEEN.update(o.locale or "mixed direction" for o in orders[2::3])
    put_orders_sync(client, settings, orders)
    jobs = [make_job("render_tickets", o.order_id, base + i, uuid.uuid4().hex[:16],
                     uuid.uuid4().hex[:16]) for i, o in enumerate(orders)]
    jobs += [make_job("refund", o.order_id, base + args.orders + i, uuid.uuid4().hex[:16],
                      uuid.uuid4().hex[:16]) for i, o in enumerate(orders[:args.refunds])]
    # What the spring's incident looked like: a payload nobody parsed.
    jobs.append(_Malformed("render_tickets", 0, base + 999, "demo", "demo"))
    ensure_group_sync(client, settings)
    enqueue_sync(client, settings, jobs)
    return len(jobs)


class _Malformed(Job):
    """A job whose order_id is "44x71", enqueued like every other one: through the
    enqueue script, under its backlog refusal level (no bare XADD to the job stream)."""

    __slots__ = ()

    def fields(self) -> list[bytes]:
        raw = super().fields()
        raw[raw.index(b"order_id") + 1] = b"44x71"
        return raw


def _run(args: argparse.Namespace, settings: config.Settings, tickets: Path) -> int:
    client = connection.sync_client(settings, timeout=5.0)
    try:
        dead_before = client.xlen(settings.dead_stream) if client.exists(
            settings.dead_stream) else 0
        total = _seed(args, settings, client)
        print(f"demo: {args.orders} orders, {total} jobs queued on {settings.stream!r} "
              f"({args.refunds} refunds, 1 malformed)")
        print(f"demo: {args.orders // 3} of them in other scripts: "
              f"{', '.join(sorted(_SCRIPTS_SEEN))} (src/stagedoor/demo/scripts/)")
        env = {**os.environ, "STAGEDOOR_REDIS_URL": settings.redis_url,
               "STAGEDOOR_TICKETS_DIR": str(tickets),
               "STAGEDOOR_STATE_DIR": settings.state_dir,
               "STAGEDOOR_LOG_LEVEL": settings.log_level}
        if getattr(args, "config", None):
            env["STAGEDOOR_CONFIG"] = args.config
        started = time.monotonic()
        sup = subprocess.Popen(
            [sys.executable, "-c", "import sys; from stagedoor.cli.supervise import main; "
             "sys.exit(main())", "--workers", str(settings.workers)], env=env)
        try:
            ok = _wait_drained(client, settings, sup, started, args.timeout)
        finally:
            if sup.poll() is None:
                sup.send_signal(signal.SIGTERM)
            code = sup.wait(settings.graceful_timeout + 30)
        elapsed = time.monotonic() - started
        pdfs = sorted(tickets.glob("order-*.pdf"))
        dead = client.xlen(settings.dead_stream) - dead_before
        print(f"demo: drained {total} jobs in {elapsed:.1f}s with {settings.workers} workers; "
              f"{len(pdfs)} PDFs in {tickets} (refunded orders have none); "
              f"{dead} dead-lettered (see `stagedoor dead list`); supervisor exit {code}")
        if not ok:
            return EX_SOFTWARE
        return 0 if code == 0 else EX_SOFTWARE
    finally:
        client.close()


def _wait_drained(client: Any, settings: config.Settings, sup: subprocess.Popen[bytes],
                  started: float, timeout: float) -> bool:
    last_report = 0.0
    while True:
        if sup.poll() is not None:
            print(f"demo: supervisor exited early with {sup.returncode}", file=sys.stderr)
            return False
        done, pending, lag = _queue_done(client, settings)
        now = time.monotonic()
        if done:
            return True
        if now - last_report > 2:
            print(f"demo: {lag} waiting, {pending} in progress "
                  f"({now - started:.0f}s)", file=sys.stderr)
            last_report = now
        if now - started > timeout:
            print(f"demo: not drained after {timeout:g}s", file=sys.stderr)
            return False
        time.sleep(0.1)
