"""What the web console costs: `python -m bench.measure_console [--quick]`.

Three figures, each against a redis-server of its own (bench/measure_common.py):

  console_drain_ratio   no-op drain rate (1 `stagedoor work --burst`, n jobs) with the
                        console running (sampling every second) and a viewer refreshing
                        the overview page and its /api/overview every second, over the
                        same drain without the console; rounds interleaved (without,
                        with, then with, without), the median of the per-pair ratios.
                        Target >= 0.97.
  console_page_p95_ms   the server-side time (the Server-Timing header the console puts
                        on every response) of every page, with a backlog of 100,000
                        entries, 10,000 dead letters and 50 consumers holding pending
                        entries; P95 over all pages' requests (and per page).  Target
                        <= 50 ms.
  console_*_commands    Redis commands (INFO commandstats) of one sample of the overview
                        (the sampler's, once per --interval whatever the viewers) and of
                        one view of each page.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from stagedoor.stream.job import Job
from stagedoor.stream.queue import dead_letter_fields

from . import measure_common as mc
from .measure_drain import drain
from .measure_kinds_ring import seed as seed_ring

PASSWORD = "bench-viewer-password"
PAGES = ("/", "/api/overview", "/fleet", "/pending", "/dead", "/dead?kind=refund&error=gate",
         "/job?order_id=50000", "/job?outbox_id=99999", "/dead/{dead}", "/kinds")


class Viewer:
    """A logged-in operator's browser, as HTTP: cookies, no redirects followed."""

    def __init__(self, base: str) -> None:
        u = urlsplit(base)
        self.conn = http.client.HTTPConnection(u.hostname or "", u.port or 80, timeout=30)
        self.cookies: dict[str, str] = {}

    def get(self, path: str, body: str | None = None) -> tuple[int, float, bytes]:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        self.conn.request("POST" if body is not None else "GET", path, body=body,
                          headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        for value in r.headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            self.cookies[name] = rest.split(";")[0]
        m = re.search(r"dur=([0-9.]+)", r.headers.get("Server-Timing", ""))
        return r.status, float(m[1]) if m else float("nan"), data

    def log_in(self) -> None:
        _, _, page = self.get("/login")
        token = re.search(rb'name="csrf" value="([^"]+)"', page)
        assert token, page[:300]
        status, _, _ = self.get("/login", f"csrf={token[1].decode()}&username=operator&"
                                f"password={PASSWORD}")
        assert status == 303, status


@contextlib.contextmanager
def console(url: str, interval: float = 1.0) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="sd-bench-web-") as d:
        pw = Path(d) / "pw"
        pw.write_text(PASSWORD + "\n")
        pw.chmod(0o600)  # the console refuses a password file others may read
        err = Path(d) / "err"
        with open(err, "wb") as f:
            proc = mc.spawn([mc.PY, "-m", "stagedoor", "web", "--redis-url", url, "--port", "0",
                             "--interval", str(interval), "--operator-password-file", str(pw),
                             "--tickets-dir", d], stderr=f)
        try:
            deadline = time.monotonic() + 30
            while not (m := re.search(r"serving on (\S+?)/?$", err.read_text(), re.M)):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"stagedoor web did not start: {err.read_text()}")
                time.sleep(0.05)
            yield m[1]
        finally:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def refresher(base: str, stop: threading.Event) -> threading.Thread:
    """The page open: the overview reloaded and its live data read, every second."""
    def run() -> None:
        v = Viewer(base)
        v.log_in()
        while not stop.wait(1.0):
            v.get("/")
            v.get("/api/overview")
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def drain_ratio(n: int, rounds: int) -> dict[str, Any]:
    without: list[float] = []
    with_page: list[float] = []
    with mc.redis_server() as server:
        for r in range(rounds):
            for mode in (("without", "with") if r % 2 == 0 else ("with", "without")):
                if mode == "without":
                    res = drain(server.url, n)
                    without.append(res["rate"])
                else:
                    with console(server.url) as base:
                        stop = threading.Event()
                        t = refresher(base, stop)
                        time.sleep(1.5)  # logged in, sampling, refreshing
                        try:
                            res = drain(server.url, n)
                        finally:
                            stop.set()
                            t.join(5)
                    with_page.append(res["rate"])
                mc.progress(f"console drain round {r + 1}/{rounds} {mode}: "
                            f"{res['rate']:,.0f} jobs/s")
    ratios = [w / o for w, o in zip(with_page, without, strict=True)]
    return {"console_drain_n": n, "console_drain_rounds": rounds,
            "console_drain_without_rate": mc.median(without),
            "console_drain_with_rate": mc.median(with_page),
            "console_drain_ratio": mc.median(ratios), "console_drain_ratios": ratios}


def calls(c: Any) -> dict[str, int]:
    stats = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in c.info("commandstats").items()}
    for name in ("config", "config|resetstat"):  # the RESETSTAT that began the count
        stats[name] = stats.get(name, 1) - 1
    return {k: v for k, v in stats.items() if v > 0}


def big_queue(url: str, backlog: int, dead: int, consumers: int) -> str:
    """The on-sale night: a backlog, dead letters, consumers holding pending entries, the
    per-kind ring full.
    Returns one dead letter's id."""
    mc.fill(url, backlog)
    c = mc.client(url)
    try:
        for k in range(consumers):  # 2 pending each; the rest stays undelivered
            c.execute_command("XREADGROUP", "GROUP", "workers", f"web-{k // 8}-{k % 8}",
                              "COUNT", 2, "STREAMS", "jobs", ">")
        pipe = c.pipeline(transaction=False)
        kinds = ("render_tickets", "refund")
        for i in range(dead):
            fields = Job(kind=kinds[i % 2], order_id=900_000 + i, outbox_id=900_000 + i,
                         request_id=f"r{i}", trace="t").fields()
            pipe.execute_command("XADD", "jobs:dead", "*", *dead_letter_fields(
                fields, error=("payment gateway timeout" if i % 3 else "font missing"),
                source_id=f"{i}-0", deliveries=5, consumer="web-0-0"))
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()
        # the Metrics tab's ring full: an hour of 3 kinds with every bucket filled
        asyncio.run(seed_ring(url, 3, every_bucket=True))
        first = c.execute_command("XRANGE", "jobs:dead", "-", "+", "COUNT", 1)
        return str(first[0][0].decode())
    finally:
        c.close()


def page_times(backlog: int, dead: int, consumers: int, repeat: int) -> dict[str, Any]:
    with mc.redis_server() as server:
        dead_id = big_queue(server.url, backlog, dead, consumers)
        c = mc.client(server.url)
        try:
            with console(server.url, interval=3600) as base:  # one sample, at start
                v = Viewer(base)
                v.log_in()
                per_page: dict[str, list[float]] = {}
                commands: dict[str, int] = {}
                for path in PAGES:
                    path = path.format(dead=dead_id)
                    status, _, _ = v.get(path)  # warm: the first view of a page
                    assert status == 200, (path, status)
                    c.config_resetstat()
                    v.get(path)
                    commands[path] = sum(calls(c).values())
                    per_page[path] = [v.get(path)[1] for _ in range(repeat)]
            with console(server.url, interval=1.0) as base:  # the sampler alone, 5 samples
                time.sleep(1.5)
                c.config_resetstat()
                time.sleep(5.0)
                sample = calls(c)
        finally:
            c.close()
    every = sorted(x for xs in per_page.values() for x in xs)
    return {"console_backlog": backlog, "console_dead": dead, "console_consumers": consumers,
            "console_page_p95_ms": mc.percentile(every, 95),
            "console_page_median_ms": mc.median(every),
            "console_pages_p95_ms": {p: mc.percentile(sorted(xs), 95)
                                     for p, xs in per_page.items()},
            "console_pages_median_ms": {p: mc.median(xs) for p, xs in per_page.items()},
            "console_page_commands": commands,
            "console_sampler_commands_5s": sample,
            "console_sample_commands": round(sum(sample.values()) / 5, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.measure_console", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller drains, fewer rounds")
    p.add_argument("--only", choices=("drain", "pages"), help="one of the two parts")
    a = p.parse_args(argv)
    report: dict[str, Any] = {}
    if a.only in (None, "pages"):
        report.update(page_times(100_000, 10_000, 50, 20 if a.quick else 50))
    if a.only in (None, "drain"):
        report.update(drain_ratio(50_000 if a.quick else 200_000, 2 if a.quick else 4))
    for k, v in report.items():
        if isinstance(v, float):
            print(f"{k:32s} {v:,.3f}")
        elif isinstance(v, dict):
            print(f"{k}:")
            for kk, vv in v.items():
                print(f"    {kk:40s} {vv:,.2f}" if isinstance(vv, float) else f"    {kk:40s} {vv}")
        else:
            print(f"{k:32s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
