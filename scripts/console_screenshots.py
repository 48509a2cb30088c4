"""Screenshots of the web console for docs/console.md and the README.

    .venv/bin/python scripts/console_screenshots.py          # overview, dead letters
    .venv/bin/python scripts/console_screenshots.py audit    # the audit log only

Starts its own redis-server (a temporary directory, a free loopback port), a
supervisor with 2 workers running the tests' `slow` handler (so a backlog drains at a
visible rate), a producer adding jobs for 20 s, a handful of dead letters, and
`stagedoor web`; logs in with headless Chromium (tests/webkit.py: offline but for
loopback) and saves docs/console-overview.png and docs/console-dead-letters.png,
quantized to a small palette (they are screenshots of text and lines).  `audit`: a
console on a Redis of its own where the operator pauses and resumes on the page,
replays two dead letters and downloads a ticket, and someone pauses and resumes from
the CLI; saves docs/console-audit.png.
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
from tests.helpers_supervisor import Sup, enqueue  # noqa: E402
from tests.webkit import chrome, console, log_in, wait  # noqa: E402

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


def main() -> int:
    if sys.argv[1:] == ["audit"]:
        return audit_shot()
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
