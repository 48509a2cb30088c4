"""Screenshots of the web console for docs/console.md and the README.

    .venv/bin/python scripts/console_screenshots.py          # overview, dead letters
    .venv/bin/python scripts/console_screenshots.py audit    # the audit log only
    .venv/bin/python scripts/console_screenshots.py pages    # issue 38's other pages
    .venv/bin/python scripts/console_screenshots.py pending  # the pending entry page only

Starts its own redis-server (a temporary directory, a free loopback port), a
supervisor with 2 workers running the tests' `slow` handler (so a backlog drains at a
visible rate), a producer adding jobs for 20 s, a handful of dead letters, and
`stagedoor web`; logs in with headless Chromium (tests/support/web.py: offline but for
loopback) and saves docs/console-overview.png and docs/console-dead-letters.png,
quantized to a small palette (they are screenshots of text and lines).  `audit`: a
console on a Redis of its own where the operator pauses and resumes on the page,
replays two dead letters and downloads a ticket, and someone pauses and resumes from
the CLI; saves docs/console-audit.png.  `pages`: dead letters by error
(console-dead-errors.png), a stuck pending entry's page with its two actions
(console-pending-entry.png; `pending`: that one alone), the overview paused with its reason
(console-paused.png), then on a Redis of their own two workers draining three kinds
for a minute and the Metrics tab (console-kinds.png); the 59 minutes before that run
are written by this script through the workers' own Flusher (telemetry/kindstats.py) with
made-up rates and timings, so that the plots show an hour: say so wherever it is shown.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from PIL import Image  # noqa: E402
from tests.support.supervisor import Sup, enqueue  # noqa: E402
from tests.support.web import chrome, console, log_in, wait  # noqa: E402

from stagedoor.demo.embedded_redis import EmbeddedRedis  # noqa: E402
from stagedoor.stream.job import Job  # noqa: E402
from stagedoor.stream.queue import dead_letter_fields  # noqa: E402

DOCS = ROOT / "docs"
ERRORS = [("render_tickets", "PermanentError: order 4471 has no seats (refunded meanwhile?)"),
          ("render_tickets", "TimeoutError: order store did not answer within 2.0 s"),
          ("refund", "payment gateway: 503 Service Unavailable"),
          ("refund", "payment gateway: 503 Service Unavailable"),
          ("render_tickets", "font not found: NotoSansThai-Regular.ttf")]


def small_png(src: Path, dst: Path) -> None:
    with Image.open(src) as im:
        im.convert("RGB").quantize(colors=64).save(dst, optimize=True)


def audit_shot() -> int:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        with EmbeddedRedis(tmp / "redis") as server:
            client = redis.Redis.from_url(server.url, protocol=2)
            dead = []
            for n, (kind, error) in enumerate(ERRORS[:3]):
                fields = Job(kind=kind, order_id=4400 + n, outbox_id=9100 + n,
                             request_id=f"req-{n}", trace="").fields()
                flat = dead_letter_fields(fields, error=error, source_id=f"1765000000{n:03d}-0",
                                          deliveries=5, consumer="web-1-0")
                dead.append(client.execute_command("XADD", "jobs:dead", "*", *flat).decode())
            (tmp / "web").mkdir()
            env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
            driver = chrome(tmp / "profile")
            try:
                with console(tmp / "web", server.url) as c:
                    subprocess.run([sys.executable, "-m", "stagedoor", "render",
                                    str(ROOT / "src/stagedoor/demo/order.json"), "-o",
                                    str(c.tickets / "order-4471.pdf")], check=True, env=env,
                                   capture_output=True, timeout=60)
                    log_in(driver, c, "operator")
                    driver.get(c.url + "/fleet")
                    driver.find_element("css selector", "input[name=reason]").send_keys(
                        "payment gateway incident")
                    driver.find_element("id", "pause").click()
                    wait(lambda: driver.find_element("id", "fleet-state").text == "PAUSED")
                    driver.find_element("id", "resume").click()
                    wait(lambda: driver.find_element("id", "fleet-state").text == "running")
                    driver.get(c.url + "/dead?kind=render_tickets")
                    for button in driver.find_elements("css selector", "button.replay")[:1]:
                        button.click()
                    wait(lambda: "replayed" in driver.find_element("css selector",
                                                                   ".flash").text)
                    driver.get(c.url + "/ticket/4471")
                    for args in (["pause", "--reason", "rolling deploy"], ["resume"],
                                 ["dead", "delete", dead[2]]):
                        subprocess.run([sys.executable, "-m", "stagedoor", *args,
                                        "--redis-url", server.url], check=True, env=env,
                                       capture_output=True, timeout=60)
                    driver.set_window_size(1280, 600)
                    driver.get(c.url + "/audit")
                    driver.save_screenshot(str(tmp / "audit.png"))
                    small_png(tmp / "audit.png", DOCS / "console-audit.png")
            finally:
                driver.quit()
                client.close()
    print(f"{DOCS / 'console-audit.png'}: {(DOCS / 'console-audit.png').stat().st_size} bytes")
    return 0


def seed_hour(url: str, minutes: int) -> None:
    """`minutes` minutes before now, written as workers write them (a Flusher a minute):
    an evening whose rate rises and falls, with a slower stretch of renders."""
    import asyncio
    import math
    import random

    from stagedoor.config import Settings
    from stagedoor.stream import connection
    from stagedoor.telemetry.kindstats import Flusher
    from stagedoor.telemetry.metrics import WorkerStats

    async def run() -> None:
        settings = Settings(redis_url=url)
        client = connection.async_client(settings, name="screenshots")
        rnd = random.Random(38)
        stats = WorkerStats(["noop", "slow", "refuse"])
        flusher = Flusher(settings, stats)
        now = time.time()
        try:
            for ago in range(minutes, 0, -1):
                x = (minutes + 1 - ago) / minutes
                rate = 1500 + 3000 * math.sin(x * math.pi) * rnd.uniform(0.9, 1.1)
                for _ in range(int(rate)):
                    stats.inc("handled", "noop")
                    stats.observe("noop", rnd.lognormvariate(math.log(0.0008), 0.4))
                    stats.observe_wait("noop", rnd.lognormvariate(math.log(0.004), 0.8))
                for _ in range(int(rate / 3)):
                    stats.inc("handled", "slow")
                    slow = 0.05 * (2.5 if 0.55 < x < 0.7 else 1.0)
                    stats.observe("slow", rnd.lognormvariate(math.log(slow), 0.25))
                    stats.observe_wait("slow", rnd.lognormvariate(math.log(0.2), 0.9))
                for _ in range(rnd.randint(0, 6)):
                    stats.inc("dead_lettered", "refuse")
                    stats.observe("refuse", rnd.lognormvariate(math.log(0.005), 0.3))
                    stats.observe_wait("refuse", rnd.lognormvariate(math.log(0.01), 0.8))
                await flusher.flush(client, now - ago * 60)
        finally:
            await client.aclose()
    asyncio.run(run())


def pages_shot(only: str | None = None) -> int:
    """Issue 38's pages; `only`: the one shot of that name (the others left as they are)."""
    from stagedoor.config import Settings
    from stagedoor.stream.keys import starts_key

    shots = ("console-dead-errors.png", "console-pending-entry.png", "console-paused.png",
             "console-kinds.png")
    shots = tuple(n for n in shots if only is None or n == only)

    def save(png: Path, name: str) -> None:
        if name in shots:
            small_png(png, DOCS / name)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        driver = chrome(tmp / "profile")
        try:
            with EmbeddedRedis(tmp / "redis") as server:
                client = redis.Redis.from_url(server.url, protocol=2)
                settings = Settings(redis_url=server.url)
                start_ms = int(time.time() * 1000) - 3 * 3600 * 1000
                for n, (kind, error) in enumerate(ERRORS * 3):
                    fields = Job(kind=kind, order_id=4400 + n, outbox_id=9100 + n,
                                 request_id=f"req-{n}", trace="").fields()
                    flat = dead_letter_fields(fields, error=error,
                                              source_id=f"{start_ms - 5000 + n * 600_000}-0",
                                              deliveries=5, consumer=f"web-1-{n % 2}")
                    # dead-lettered over the last three hours: first and last seen differ
                    client.execute_command("XADD", "jobs:dead", f"{start_ms + n * 600_000}-0",
                                           *flat)
                # a stuck entry: added 95 minutes ago, read by a worker of a host that
                # died, delivered 3 times, idle since
                added_ms = int(time.time() * 1000) - 95 * 60_000
                ids = [client.execute_command(
                    "XADD", settings.stream, f"{added_ms + n}-0",
                    *Job(kind="slow", order_id=4471 + n, outbox_id=4471 + n,
                         request_id=f"req-{n}", trace="").fields()).decode()
                    for n in range(3)]
                client.execute_command("XGROUP", "CREATE", settings.stream, settings.group,
                                       "0")
                client.execute_command("XREADGROUP", "GROUP", settings.group, "web-2-1",
                                       "COUNT", "3", "STREAMS", settings.stream, ">")
                # idle 1h30 with 3 deliveries: past claim_idle_ms, nobody took it over
                client.execute_command("XCLAIM", settings.stream, settings.group, "web-2-1",
                                       "0", ids[0], "IDLE", "5400000", "RETRYCOUNT", "3")
                client.set(settings.key("lasterr", ids[0]),
                           "TimeoutError: order store did not answer within 2.0 s")
                client.set(starts_key(settings, ids[0]), 3)
                enqueue(server.url, "slow", range(5000, 5240))  # a backlog, held
                (tmp / "web").mkdir()
                with console(tmp / "web", server.url) as c:
                    log_in(driver, c, "operator")
                    driver.set_window_size(1280, 620)
                    driver.get(c.url + "/dead/errors")
                    driver.save_screenshot(str(tmp / "a.png"))
                    save(tmp / "a.png", "console-dead-errors.png")
                    driver.get(c.url + "/pending")  # the longest idle first: the stuck one
                    driver.find_element("css selector", "a.entry-page").click()
                    wait(lambda: driver.find_element("id", "release"))
                    driver.set_window_size(1280, 520)
                    driver.save_screenshot(str(tmp / "b.png"))
                    save(tmp / "b.png", "console-pending-entry.png")
                    driver.get(c.url + "/")
                    driver.find_element("css selector", "input[name=reason]").send_keys(
                        "payment gateway incident: hold renders until it answers")
                    driver.find_element("id", "pause").click()
                    wait(lambda: driver.find_element("css selector",
                                                     '[data-field="paused"]').text == "PAUSED")
                    time.sleep(2)
                    driver.set_window_size(1280, 520)
                    driver.save_screenshot(str(tmp / "c.png"))
                    save(tmp / "c.png", "console-paused.png")
                client.close()
            if "console-kinds.png" not in shots:
                print(*(f"{DOCS / n}: {(DOCS / n).stat().st_size} bytes" for n in shots),
                      sep="\n")
                return 0
            with EmbeddedRedis(tmp / "redis2") as server:
                seed_hour(server.url, 59)
                stop = threading.Event()

                def produce() -> None:
                    n = 1
                    while not stop.is_set():
                        enqueue(server.url, "noop", range(n, n + 8))
                        enqueue(server.url, "slow", range(100_000 + n, 100_000 + n + 3))
                        if n % 40 == 1:
                            enqueue(server.url, "refuse", [200_000 + n])
                        n += 8
                        time.sleep(0.1)
                (tmp / "sup").mkdir()
                sup = Sup(tmp / "sup", server.url, ["--workers", "2", "--concurrency", "8"],
                          env={"SUP_TEST_SLOW": "0.05", "SUP_TEST_MARKS": ""})
                sup.start()
                producer = threading.Thread(target=produce, daemon=True)
                producer.start()
                try:
                    time.sleep(75)
                    stop.set()
                    producer.join()
                    time.sleep(3)
                    (tmp / "web2").mkdir()
                    with console(tmp / "web2", server.url) as c:
                        log_in(driver, c, "viewer")
                        driver.set_window_size(1280, 1010)
                        driver.get(c.url + "/kinds")
                        driver.save_screenshot(str(tmp / "d.png"))
                        save(tmp / "d.png", "console-kinds.png")
                finally:
                    stop.set()
                    sup.kill_all()
        finally:
            driver.quit()
    for name in shots:
        print(f"{DOCS / name}: {(DOCS / name).stat().st_size} bytes")
    return 0


def main() -> int:
    if sys.argv[1:] == ["audit"]:
        return audit_shot()
    if sys.argv[1:] == ["pages"]:
        return pages_shot()
    if sys.argv[1:] == ["pending"]:
        return pages_shot("console-pending-entry.png")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        with EmbeddedRedis(tmp / "redis") as server:
            client = redis.Redis.from_url(server.url, protocol=2)
            for n, (kind, error) in enumerate(ERRORS * 3):
                fields = Job(kind=kind, order_id=4400 + n, outbox_id=9100 + n,
                             request_id=f"req-{n}", trace="").fields()
                flat = dead_letter_fields(fields, error=error, source_id=f"1765000000{n:03d}-0",
                                          deliveries=5, consumer=f"web-1-{n % 2}")
                client.execute_command("XADD", "jobs:dead", "*", *flat)
            stop = threading.Event()

            def produce() -> None:
                n = 1
                while not stop.is_set():
                    enqueue(server.url, "slow", range(n, n + 60))  # 600/s: more than drains
                    n += 60
                    time.sleep(0.1)
            (tmp / "sup").mkdir()
            sup = Sup(tmp / "sup", server.url, ["--workers", "2", "--concurrency", "8"],
                      env={"SUP_TEST_SLOW": "0.05"})
            sup.cmd[sup.cmd.index("--consumer") + 1] = "web-1"
            producer = threading.Thread(target=produce, daemon=True)
            producer.start()
            sup.start()
            (tmp / "web").mkdir()
            driver = chrome(tmp / "profile")
            try:
                with console(tmp / "web", server.url) as c:
                    driver.set_window_size(1280, 860)
                    log_in(driver, c, "operator")
                    time.sleep(20)
                    stop.set()
                    time.sleep(4)
                    wait(lambda: driver.find_element("id", "backlog").text)
                    driver.save_screenshot(str(tmp / "overview.png"))
                    small_png(tmp / "overview.png", DOCS / "console-overview.png")
                    driver.get(c.url + "/dead?error=gateway")
                    driver.set_window_size(1280, 560)
                    driver.save_screenshot(str(tmp / "dead.png"))
                    small_png(tmp / "dead.png", DOCS / "console-dead-letters.png")
            finally:
                driver.quit()
                sup.kill_all()
                client.close()
    for name in ("console-overview.png", "console-dead-letters.png"):
        print(f"{DOCS / name}: {(DOCS / name).stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
