"""Running `stagedoor web` under test and driving it with a real browser.

`Console` starts the real command (`python -m stagedoor web`, --port 0) with a password
file per role and reads the port it printed.  `chrome()` is Debian's chromium through
its chromium-driver (Selenium, `Service('/usr/bin/chromedriver')`): headless, a fresh
profile, every background service off, and a proxy that does not exist for every
address but loopback, so the browser cannot fetch anything from outside this machine
(the page itself must need nothing from outside: no CDN, docs/console.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.paths import SRC
from tests.support.supervisor import REPO

PASSWORDS = {"viewer": "viewer-Secret-1", "operator": "operator-Secret-2"}
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


class Console:
    """One `stagedoor web` process."""

    def __init__(self, tmp_path: Path, redis_url: str, args: Sequence[str] = (),
                 roles: Sequence[str] = ("viewer", "operator")) -> None:
        self.tmp = tmp_path
        self.tickets = tmp_path / "tickets"
        self.tickets.mkdir(exist_ok=True)
        self.err_path = tmp_path / "web.err"
        cmd = [sys.executable, "-m", "stagedoor", "web", "--redis-url", redis_url,
               "--port", "0", "--interval", "0.5", "--tickets-dir", str(self.tickets)]
        for role in roles:
            f = tmp_path / f"{role}-password"
            f.write_text(PASSWORDS[role] + "\n")
            f.chmod(0o600)  # the console refuses a file others may read
            cmd += [f"--{role}-password-file", str(f)]
        self.cmd = [*cmd, *args]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
        self.env["PYTHONPATH"] = f"{SRC}{os.pathsep}{REPO}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 20.0) -> Console:
        with open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(self.cmd, cwd=REPO, env=self.env,
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(r"serving on (https?://\S+?)/?$", self.stderr(), re.M)
            if m:
                self.url = m[1]
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"stagedoor web exited {self.proc.returncode}:\n"
                                     f"{self.stderr()}")
            time.sleep(0.05)
        raise AssertionError(f"stagedoor web did not say where it serves:\n{self.stderr()}")

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def console(tmp_path: Path, redis_url: str, args: Sequence[str] = (),
            roles: Sequence[str] = ("viewer", "operator")) -> Iterator[Console]:
    c = Console(tmp_path, redis_url, args, roles).start()
    try:
        yield c
    finally:
        c.stop()


def chrome(profile: Path, *, javascript: bool = True, rebind: Sequence[str] = ()) -> Any:
    """Headless Chromium from Debian's packages, offline but for loopback (and with
    scripts off for javascript=False).  rebind: host names the browser resolves to
    127.0.0.1, as a DNS rebinding attacker's name would (reached without the proxy)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER), \
        "chromium and chromium-driver are needed (apt-get install chromium chromium-driver; " \
        "scripts/setup.sh installs them)"
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager (not used here) never downloads
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps",
                "--disable-extensions", "--disable-domain-reliability",
                "--disable-client-side-phishing-detection", "--no-default-browser-check",
                "--disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication",
                "--dns-prefetch-disable", "--metrics-recording-only",
                # everything but loopback goes to a proxy that is not there
                "--proxy-server=http://127.0.0.1:9", "--window-size=1280,900",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    if rebind:
        options.add_argument("--host-resolver-rules=" + ", ".join(
            f"MAP {name} 127.0.0.1" for name in rebind))
        options.add_argument("--proxy-bypass-list=" + ";".join(rebind))
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2})
    service = Service(CHROMEDRIVER, log_output=subprocess.DEVNULL)
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(20)
    return driver


def log_in(driver: Any, c: Console, role: str, password: str | None = None) -> None:
    from selenium.webdriver.common.by import By
    driver.delete_all_cookies()
    driver.get(c.url + "/login")
    driver.find_element(By.ID, "username").send_keys(role)
    driver.find_element(By.ID, "password").send_keys(PASSWORDS[role] if password is None
                                                     else password)
    button = driver.find_element(By.ID, "login")
    button.click()
    wait(lambda: _stale(button), 20, "the page after log-in")


def _stale(element: Any) -> bool:
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    return False


def wait(predicate: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            last = predicate()
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def post_from_page(driver: Any, path: str, fields: dict[str, str]) -> tuple[int, str]:
    """A POST sent by the page's own script (same origin, its cookies): what a forged
    form or a viewer's hand-made request would send.  (status, body)."""
    result = driver.execute_async_script("""
        const [path, fields, done] = arguments;
        fetch(path, {method: 'POST', credentials: 'same-origin', redirect: 'manual',
                     body: new URLSearchParams(fields)})
          .then(r => r.text().then(t => done([r.status, t])))
          .catch(e => done([0, String(e)]));
    """, path, fields)
    return int(result[0]), str(result[1])
