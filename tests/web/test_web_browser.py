"""The web console in a real browser: headless Chromium (Debian's) driven by Selenium.

Each test starts a real `stagedoor web` on a free port against the suite's Redis
(tests/support/web.py); the browser is shared by the module (a fresh profile, cookies
cleared between log-ins).  Asserted in the browser: log-in and wrong credentials, a
backlog drained by a real supervisor seen live without a reload, job lookup and the
ticket PDF (the operator's only, each download on the audit page), dead letters
filtered, replayed and deleted, pause and resume, a viewer who cannot act (no button,
POST refused), a POST without the CSRF token refused, hostile field values shown as
text with no injected script run, and a page of a name rebound to the console's
address (DNS rebinding) served nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.stream.job import Job
from stagedoor.stream.queue import dead_letter_fields
from tests.stream.test_replay_backlog import add_dead_letters, audit, fill_backlog, unread
from tests.support.paths import PACKAGE
from tests.support.supervisor import Sup, enqueue
from tests.support.web import chrome, console, log_in, post_from_page, wait

ORDER = PACKAGE / "demo" / "order.json"
EVIL = "evil.example"  # an attacker's name, resolved to the console by the browser
pytestmark = [pytest.mark.server, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chrome(tmp_path_factory.mktemp("chromium-profile"), rebind=[EVIL])
    try:
        yield driver
    finally:
        driver.quit()


def by_id(driver: Any, name: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, name)


def all_css(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def test_log_in_wrong_credentials_refused(browser: Any, tmp_path: Path, redis_url: str) -> None:
    with console(tmp_path, redis_url) as c:
        log_in(browser, c, "operator", password="not-the-password")
        assert "wrong user name or password" in by_id(browser, "login-error").text
        assert browser.current_url.endswith("/login")
        assert not browser.get_cookie("sd_session")
        # the viewer's password is not the operator's
        log_in(browser, c, "operator", password="viewer-Secret-1")
        assert by_id(browser, "login-error")
        # the pages stay behind the log-in
        browser.get(c.url + "/dead")
        assert browser.current_url.endswith("/login")
        log_in(browser, c, "operator")
        wait(lambda: browser.current_url.rstrip("/") == c.url, what="the overview")
        assert by_id(browser, "backlog").text == "0"
        log = c.stderr()
        assert log.count("failed log-in for user 'operator'") == 2 and "log-in: operator" in log
        assert "Secret" not in log  # no password, right or wrong, is logged


def test_a_page_of_a_rebound_name_gets_nothing(browser: Any, tmp_path: Path,
                                               redis_url: str) -> None:
    """DNS rebinding: evil.example's page, its name now resolving to the console, loads
    the console's log-in form from its own origin, logs in with a guessed or phished
    password and pauses the fleet; the console serves only its own host names."""
    with console(tmp_path, redis_url) as c:
        evil = c.url.replace("127.0.0.1", EVIL)
        browser.delete_all_cookies()
        browser.get(evil + "/login")
        assert "unknown Host" in browser.find_element("css selector", "body").text
        assert all_css(browser, "#login") == []  # no form to fill
        # the page's own script, same origin as far as the browser knows: refused too
        token = browser.execute_async_script("""
            const done = arguments[0];
            fetch('/login').then(r => r.text()).then(t => {
              const m = t.match(/name="csrf" value="([^"]+)"/);
              if (!m) return done([0, 'no form']);
              return fetch('/login', {method: 'POST', redirect: 'manual', body:
                  new URLSearchParams({csrf: m[1], username: 'operator',
                                       password: 'operator-Secret-2'})})
                .then(() => fetch('/fleet')).then(r => r.text()).then(f => {
                  const t2 = f.match(/name="csrf" value="([^"]+)"/);
                  return fetch('/pause', {method: 'POST', redirect: 'manual', body:
                      new URLSearchParams({csrf: t2 ? t2[1] : '', reason: 'rebound'})})
                    .then(r => done([r.status, 'posted']));
                });
            }).catch(e => done([0, String(e)]));
        """)
        assert token[1] == "no form", token
        client = redis.Redis.from_url(redis_url, protocol=2)
        try:
            assert client.keys("stagedoor:paused:*") == []
        finally:
            client.close()
        # the console's own name still works in the same browser
        log_in(browser, c, "operator")
        wait(lambda: browser.current_url.rstrip("/") == c.url, what="the overview")


def test_backlog_drains_live(browser: Any, tmp_path: Path, redis_url: str) -> None:
    enqueue(redis_url, "noop", range(1, 401))
    (tmp_path / "web").mkdir()
    with console(tmp_path / "web", redis_url) as c:
        log_in(browser, c, "viewer")
        wait(lambda: by_id(browser, "backlog").text == "400", what="a backlog of 400")
        browser.execute_script("window.__sameDocument = 'yes';")
        sup = Sup(tmp_path, redis_url, ["--workers", "1"]).start()
        try:
            def drained() -> bool:
                return by_id(browser, "backlog").text == "0" and \
                    browser.find_element("css selector", '[data-field="pending"]').text == "0"
            wait(drained, 60, "the page to show the backlog drained")
        finally:
            sup.kill_all()
        # the numbers changed in place: same document, no reload, by the live script
        assert browser.execute_script("return window.__sameDocument;") == "yes"
        assert by_id(browser, "live").get_attribute("data-updated")
        # the chart was redrawn with the out rate of the drain
        points = by_id(browser, "chart-out").get_attribute("points")
        assert points and any(float(p.split(",")[1]) < 139 for p in points.split())


# -- dead letters --------------------------------------------------------------------------
EARLY, LATE = 1765000000000, 1765000900000  # 2025-12-06 05:46:40 and 15 minutes later


def dead_letter(client: redis.Redis, entry_id: str, kind: str, order: int, error: str,
                **extra: str) -> str:
    fields = Job(kind=kind, order_id=order, outbox_id=order, request_id=f"r{order}",
                 trace="t").fields()
    for name, value in extra.items():
        fields += [name.encode(), value.encode()]
    flat = dead_letter_fields(fields, error=error, source_id=f"{order}-0", deliveries=5,
                              consumer="sup-0")
    return str(client.execute_command("XADD", "jobs:dead", entry_id, *flat).decode())


def seed_dead(redis_url: str) -> dict[str, str]:
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        ids = {}
        for n in range(4):  # in the window: 2 render_tickets + gateway, 1 refund, 1 font
            kind = ("render_tickets", "render_tickets", "refund", "render_tickets")[n]
            error = "font missing" if n == 3 else "payment gateway timeout"
            ids[f"early{n}"] = dead_letter(client, f"{EARLY + n}-0", kind, 100 + n, error)
        for n in range(2):  # after the window, same kind and error
            ids[f"late{n}"] = dead_letter(client, f"{LATE + n}-0", "render_tickets", 200 + n,
                                          "payment gateway timeout")
        return ids
    finally:
        client.close()


def dead_ids(redis_url: str) -> list[str]:
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        return [i.decode() for i, _ in client.xrange("jobs:dead")]
    finally:
        client.close()


def stream_orders(redis_url: str) -> list[str]:
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        return [f[b"order_id"].decode() for _, f in client.xrange("jobs")]
    finally:
        client.close()


def test_dead_letters_filter_replay_delete(browser: Any, tmp_path: Path, redis_url: str
                                           ) -> None:
    ids = seed_dead(redis_url)
    with console(tmp_path, redis_url) as c:
        log_in(browser, c, "operator")
        # issue 38 item 8: counted by error, with the first and last seen of each
        browser.get(c.url + "/dead")
        by_id(browser, "by-error").click()
        rows = wait(lambda: [r.text for r in all_css(browser, "#errors tbody tr")] or None)
        assert rows[0].startswith("5 payment gateway timeout refund, render_tickets "), rows
        assert rows[1].startswith("1 font missing render_tickets "), rows
        assert len(rows) == 2 and rows[0].count("2025-12-06T") == 2, rows
        browser.get(c.url + "/dead")
        assert len(all_css(browser, "#dead tbody tr[data-id]")) == 6
        by_id(browser, "f-kind").send_keys("render_tickets")
        by_id(browser, "f-error").send_keys("gateway")
        by_id(browser, "f-since").send_keys("2025-12-06T05:46:00Z")
        by_id(browser, "f-until").send_keys("2025-12-06T05:50:00Z")
        by_id(browser, "filter").click()
        rows = wait(lambda: all_css(browser, "#dead tbody tr[data-id]")
                    if "kind=render_tickets" in browser.current_url else None)
        assert sorted(r.get_attribute("data-id") for r in rows) == sorted(
            [ids["early0"], ids["early1"]])
        # replay every match: first the dry run with the count, then the confirmation
        by_id(browser, "bulk-replay").click()
        wait(lambda: "would replay 2 entries" in by_id(browser, "dry-run").text)
        assert dead_ids(redis_url) == list(ids.values())  # the dry run touched nothing
        by_id(browser, "confirm").click()
        wait(lambda: "replayed 2" in browser.find_element("css selector", ".flash").text)
        assert sorted(stream_orders(redis_url)) == ["100", "101"]
        assert dead_ids(redis_url) == [ids[k] for k in ("early2", "early3", "late0", "late1")]
        # the filter is kept after the action; the replayed ones are gone from it
        assert all_css(browser, "#dead tbody tr[data-id]") == []
        # delete one entry by its row's button
        browser.get(c.url + "/dead?kind=refund")
        [row] = all_css(browser, "#dead tbody tr[data-id]")
        assert row.get_attribute("data-id") == ids["early2"]
        row.find_element("css selector", "button.delete").click()
        # a confirm step that says what goes: nothing is deleted before it
        confirm = wait(lambda: all_css(browser, "#confirm-list tbody tr"))
        assert [r.get_attribute("data-id") for r in confirm] == [ids["early2"]]
        assert "refund" in confirm[0].text and "payment gateway timeout" in confirm[0].text
        assert ids["early2"] in dead_ids(redis_url)
        by_id(browser, "confirm-delete").click()
        wait(lambda: "deleted 1" in browser.find_element("css selector", ".flash").text)
        assert ids["early2"] not in dead_ids(redis_url)
        assert len(dead_ids(redis_url)) == 3 and sorted(stream_orders(redis_url)) == [
            "100", "101"]  # deleted, not replayed
        # purge what a filter selects, after the dry run's count: only those go
        browser.get(c.url + "/dead?error=font")
        by_id(browser, "bulk-purge").click()
        wait(lambda: "would purge 1 entries" in by_id(browser, "dry-run").text)
        [listed] = all_css(browser, "#confirm-list tbody tr")  # what, not bare ids
        assert ids["early3"] in listed.text and "font missing" in listed.text
        by_id(browser, "confirm").click()
        wait(lambda: "purged 1" in browser.find_element("css selector", ".flash").text)
        assert dead_ids(redis_url) == [ids["late0"], ids["late1"]]
        assert "action /dead/bulk by operator" in c.stderr()


def test_bulk_replay_warns_and_stops_at_the_level(browser: Any, tmp_path: Path,
                                                   settings: Settings, redis_url: str) -> None:
    """Issue 36: a backlog 10 under the refusal level (maxlen 1000: 950) and 30 dead
    letters.  The confirm page says only 10 fit; confirmed, 10 go back, 20 stay, the
    message says why, and no unread job is trimmed."""
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        waiting = fill_backlog(client, settings, filled=940, read=0)
        dead = add_dead_letters(client, settings, 30)
        with console(tmp_path, redis_url, ["--maxlen", "1000"]) as c:
            log_in(browser, c, "operator")
            browser.get(c.url + "/dead")
            by_id(browser, "bulk-replay").click()
            warning = wait(lambda: by_id(browser, "backlog-warning").text)
            assert warning.startswith("Only 10 of 30 fit now: the backlog of jobs is 940 "
                                      "entries, and the refusal level is 950 (95% of maxlen "
                                      "1000)"), warning
            assert "leaves the other 20 as dead letters" in warning
            assert client.xlen("jobs:dead") == 30  # the dry run touched nothing
            by_id(browser, "confirm").click()
            said = wait(lambda: [e.text for e in all_css(browser, ".flash")]
                        if "/dead/bulk" not in browser.current_url else None)
            assert said[0].startswith("replayed 10: "), said
            assert said[1].startswith("20 of 30 not replayed, left as dead letters: the "
                                      "backlog of jobs is 950 entries"), said
        assert [i.decode() for i, _ in client.xrange("jobs:dead")] == dead[10:]
        assert audit(client, settings) == (950, 0)
        assert unread(client, settings)[:940] == waiting
    finally:
        client.close()


def test_viewer_cannot_act(browser: Any, tmp_path: Path, redis_url: str) -> None:
    ids = seed_dead(redis_url)
    with console(tmp_path, redis_url) as c:
        log_in(browser, c, "viewer")
        browser.get(c.url + "/dead")
        assert len(all_css(browser, "#dead tbody tr[data-id]")) == 6
        assert all_css(browser, "button.replay, button.delete, #bulk-replay, #bulk-purge") == []
        browser.get(c.url + "/fleet")
        assert all_css(browser, "#pause, #resume") == []
        token = browser.find_element("css selector", "form.logout input[name=csrf]"
                                     ).get_attribute("value")
        # a hand-made POST with the viewer's own valid token is refused all the same
        for path, fields in (("/dead/delete", {"id": ids["early0"]}),
                             ("/dead/replay", {"id": ids["early0"]}),
                             ("/dead/bulk", {"action": "purge", "confirm": "1",
                                             "upto": ids["late1"]}),
                             ("/pause", {"reason": "viewer"})):
            status, body = post_from_page(browser, path, {**fields, "csrf": token})
            assert status == 403 and "only the operator" in body, (path, status, body)
        assert dead_ids(redis_url) == list(ids.values())
        assert stream_orders(redis_url) == []
        client = redis.Redis.from_url(redis_url, protocol=2)
        try:
            assert client.keys("stagedoor:paused:*") == []
        finally:
            client.close()


def test_action_without_csrf_token_refused(browser: Any, tmp_path: Path, redis_url: str
                                           ) -> None:
    ids = seed_dead(redis_url)
    with console(tmp_path, redis_url) as c:
        log_in(browser, c, "operator")
        browser.get(c.url + "/dead")
        for fields in ({"id": ids["early0"]}, {"id": ids["early0"], "csrf": "forged"}):
            status, body = post_from_page(browser, "/dead/delete", fields)
            assert status == 403 and "CSRF" in body, (fields, status, body)
        assert ids["early0"] in dead_ids(redis_url)
        # the same request with the page's token goes through (so the refusal was the token)
        token = browser.find_element("css selector", "form.logout input[name=csrf]"
                                     ).get_attribute("value")
        status, _ = post_from_page(browser, "/dead/delete", {"id": ids["early0"], "csrf": token,
                                                            "confirm": "1"})
        assert status in (0, 200, 303)  # a redirect, opaque to fetch(redirect: 'manual')
        assert ids["early0"] not in dead_ids(redis_url)


# -- hostile values --------------------------------------------------------------------------
HOSTILE = {
    "script": "<script>window.__pwned='script'</script>",
    "img": "\"><img src=x onerror=\"window.__pwned='img'\">",
    "attr": "' onmouseover='window.__pwned=1' x='",
    "svg": "<svg onload=window.__pwned='svg'>",
    "close": "</td></tr></table><script>window.__pwned='close'</script>",
    "js": "javascript:window.__pwned='href'",
}


BIDI = "4471\u202e0988"


def by_id_css(driver: Any, css: str) -> str:
    return str(driver.find_element("css selector", css).text)


def test_hostile_values_are_shown_as_text_and_run_nothing(browser: Any, tmp_path: Path,
                                                          redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        # a job whose every field is hostile, pending under a hostile consumer name,
        # with a hostile last error; and a dead letter the same
        flat: list[Any] = ["kind", HOSTILE["script"], "order_id", HOSTILE["img"],
                           "outbox_id", HOSTILE["svg"], "request_id", HOSTILE["attr"],
                           HOSTILE["close"], HOSTILE["js"]]
        entry = client.execute_command("XADD", "jobs", "*", *flat).decode()
        client.xgroup_create("jobs", "workers", id="0")
        client.xreadgroup("workers", HOSTILE["img"], {"jobs": ">"}, count=1)
        client.set(f"stagedoor:lasterr:{entry}", HOSTILE["close"])
        dead = dead_letter(client, "*", HOSTILE["script"], 7, HOSTILE["img"],
                           **{HOSTILE["close"]: HOSTILE["js"]})
        client.execute_command("XADD", "jobs:dead", "*", *flat, "dead:error", HOSTILE["svg"])
        # issue 38 item 6: a direction override in an order id (shown raw it reads
        # 44718890), and a worker record no worker wrote (a 500 for everyone on /fleet)
        bidi = client.execute_command("XADD", "jobs", "*", "kind", "mail", "order_id",
                                      BIDI, "outbox_id", "1").decode()
        client.xreadgroup("workers", "w\u202egood", {"jobs": ">"}, count=1)
        client.hset("stagedoor:fleet:jobs", "w-bad", 1)
        client.set("stagedoor:worker:jobs:w-bad", orjson.dumps({
            "consumer": "w-bad", "host": "h", "slot": 0, "pid": 1, "version": "1",
            "renderer": None, "started": 1e20, "handled": 0, "in_flight": 0,
            "rss_bytes": 0, "paused": "no", "seen_ms": 1}))
    finally:
        client.close()
    with console(tmp_path, redis_url) as c:
        log_in(browser, c, "operator")
        for path in ("/", "/fleet", "/pending", "/dead", f"/dead/{dead}",
                     f"/job?entry_id={entry}", "/dead?kind=" + HOSTILE["script"]):
            browser.get(c.url + path)
            wait(lambda: browser.execute_script("return document.readyState") == "complete")
            body = browser.find_element("css selector", "main").text
            assert browser.execute_script("return window.__pwned;") is None, path
            # no element the payloads would have made exists
            assert all_css(browser, "main script, main img, main svg[onload], [onerror], "
                                    "[onmouseover], a[href^=javascript]") == [], path
            if path in ("/pending", "/dead", f"/job?entry_id={entry}"):
                assert "<script>window.__pwned='script'</script>" in body or \
                    "<svg onload=" in body, (path, body[:500])
            if path == "/pending":
                assert HOSTILE["close"] in body and HOSTILE["img"] in body
            if path == f"/dead/{dead}":
                assert HOSTILE["img"] in by_id(browser, "dead-error").text
                assert HOSTILE["close"] in by_id(browser, "dead-fields").text
            assert "\u202e" not in body, path  # never raw, on any page
            if path == "/pending":
                assert "4471\\u202e0988" in body and "w\\u202egood" in body, body[:2000]
            if path == "/fleet":
                row = browser.find_element("css selector", "#workers tr.malformed").text
                assert "w-bad" in row and "MALFORMED" in row, row
                assert "started: 1e+20 is not a time" in row, row
        browser.get(c.url + f"/job?entry_id={bidi}")
        assert "4471\\u202e0988 / 1" in by_id_css(browser, "main"), by_id_css(browser, "main")
        time.sleep(1.2)  # a live refresh of the overview came and went: still nothing ran
        browser.get(c.url + "/")
        time.sleep(1.2)
        assert browser.execute_script("return window.__pwned;") is None


# -- pause and resume ------------------------------------------------------------------------
def test_pause_and_resume_the_fleet(browser: Any, tmp_path: Path, redis_url: str) -> None:
    (tmp_path / "web").mkdir()
    sup = Sup(tmp_path, redis_url, ["--workers", "2"]).start()
    try:
        sup.wait_ready(2, timeout=30)
        with console(tmp_path / "web", redis_url) as c:
            log_in(browser, c, "operator")
            browser.get(c.url + "/fleet")
            wait(lambda: len(all_css(browser, "#workers tbody tr td")) > 1 or
                 browser.refresh(), 30, "two workers on the fleet page")
            # issue 38 item 8: only the button that applies, and the reason, who, since
            assert not by_id(browser, "resume").is_displayed()
            browser.find_element("css selector", "#pause-form input[name=reason]").send_keys(
                "doors open late")
            by_id(browser, "pause").click()
            wait(lambda: by_id(browser, "fleet-state").text == "PAUSED")
            assert not by_id(browser, "pause").is_displayed()
            detail = by_id(browser, "paused-detail").text
            assert "by operator@127.0.0.1: doors open late" in detail and "since 20" in detail

            def workers_paused() -> bool:
                browser.get(c.url + "/fleet")
                cells = [r.find_elements("css selector", "td")
                         for r in all_css(browser, "#workers tbody tr")]
                return len(cells) == 2 and all(row[10].text == "yes" for row in cells)
            wait(workers_paused, 30, "both workers to say they are paused")
            enqueue(redis_url, "noop", range(1, 51))
            browser.get(c.url + "/")
            wait(lambda: by_id(browser, "backlog").text == "50", 20, "a backlog of 50")
            assert browser.find_element("css selector", '[data-field="paused"]').text == "PAUSED"
            assert "doors open late" in by_id(browser, "paused-detail").text
            assert not by_id(browser, "pause").is_displayed()
            time.sleep(2)  # paused workers read nothing: the backlog stays
            assert by_id(browser, "backlog").text == "50"
            assert browser.find_element("css selector", '[data-field="drain"]').text == \
                "not while paused"  # it said "never", as if the workers could not keep up
            by_id(browser, "resume").click()
            wait(lambda: by_id(browser, "backlog").text == "0", 30, "the backlog to drain")
            assert browser.find_element("css selector", '[data-field="paused"]').text == \
                "running"
            wait(lambda: by_id(browser, "pause").is_displayed(), 10, "the Pause button back")
            assert not by_id(browser, "resume").is_displayed()
            sup.assert_running()  # paused and resumed, never stopped
    finally:
        sup.kill_all()


# -- job lookup and the ticket ---------------------------------------------------------------
def test_find_a_job_by_order_id_and_open_its_ticket(browser: Any, tmp_path: Path,
                                                     redis_url: str) -> None:
    [entry] = enqueue(redis_url, "render_tickets", [4471])
    (tmp_path / "tickets").mkdir()
    subprocess.run([sys.executable, "-m", "stagedoor", "render", str(ORDER), "-o",
                    str(tmp_path / "tickets" / "order-4471.pdf")], check=True, timeout=60,
                   capture_output=True)
    with console(tmp_path, redis_url) as c:
        # the viewer finds the job, sees that there is a ticket, and cannot have it
        log_in(browser, c, "viewer")
        browser.get(c.url + "/job?order_id=4471")
        [span] = all_css(browser, "section.job .ticket")
        assert span.tag_name == "span"  # no link
        assert "only the operator downloads tickets" in all_css(browser, "main")[0].text
        status, body = fetch_from_page(browser, "/ticket/4471")
        assert status == 403 and "only the operator" in body
        log_in(browser, c, "operator")
        browser.get(c.url + "/job")
        by_id(browser, "order_id").send_keys("4471")
        by_id(browser, "find").click()
        [section] = wait(lambda: all_css(browser, "section.job"), what="the job's story")
        assert section.get_attribute("data-entry") == entry
        assert section.find_element("css selector", ".state").text == "queued"
        link = section.find_element("css selector", "a.ticket")
        assert link.text == "order-4471.pdf"
        href = link.get_attribute("href")
        # the browser fetches the ticket with its session: a real PDF, served as one
        status, ctype, head = browser.execute_async_script("""
            const [url, done] = arguments;
            fetch(url, {credentials: 'same-origin'}).then(r => r.arrayBuffer().then(b =>
              done([r.status, r.headers.get('content-type'),
                    String.fromCharCode(...new Uint8Array(b).slice(0, 5))])));
        """, href)
        assert (status, ctype, head) == (200, "application/pdf", "%PDF-")
        link.click()  # and it opens in Chromium's PDF viewer
        wait(lambda: urlsplit(browser.current_url).path == "/ticket/4471", 20,
             "the ticket to open")
        # an order nobody enqueued: found nothing, said so
        browser.get(c.url + "/job?order_id=4472")
        assert "Nothing found" in by_id(browser, "no-job").text
        # the operator's two downloads (the fetch, the click) are on the audit page
        browser.get(c.url + "/audit")
        rows = all_css(browser, "#audit tbody tr[data-id]")
        assert [r.find_element("css selector", ".action").text for r in rows] == [
            "ticket download", "ticket download"]
        assert "operator@127.0.0.1" in rows[0].text and "order-4471.pdf" in rows[0].text
        # issue 38 item 5: an id Redis never generated is not found, never a state (it was
        # TRIMMED-UNREAD); one past the year 9999 is a 400 with the form (it was a 500);
        # a job whose dead letter was deleted is still DEAD
        browser.get(c.url + "/job?entry_id=99999999999999-0")
        assert by_id(browser, "no-job").text.startswith("Not found: never added")
        assert all_css(browser, "section.job") == []
        browser.get(c.url + "/job?entry_id=253402300800000-0")
        assert "past the year 9999" in browser.find_element("css selector", ".flash").text
        assert all_css(browser, "#job-form")
        client = redis.Redis.from_url(redis_url, protocol=2)
        try:
            dead = dead_letter(client, "*", "mail", 4473, "card declined")  # source 4473-0
        finally:
            client.close()
        browser.get(c.url + f"/dead/{dead}")
        browser.find_element("css selector", "button.danger").click()  # Delete, then
        wait(lambda: all_css(browser, "#confirm-delete"))[0].click()  # its confirm step
        wait(lambda: "deleted 1" in browser.find_element("css selector", ".flash").text)
        browser.get(c.url + "/job?entry_id=4473-0")
        [section] = all_css(browser, "section.job")
        assert section.find_element("css selector", ".state").text == "dead"
        assert "dead letter removed (deleted)" in section.find_element(
            "css selector", ".dead-removed").text


def fetch_from_page(driver: Any, path: str) -> tuple[int, str]:
    """A GET by the page's own script (its cookies): (status, body)."""
    result = driver.execute_async_script("""
        const [path, done] = arguments;
        fetch(path, {credentials: 'same-origin'}).then(r => r.text().then(t =>
          done([r.status, t]))).catch(e => done([0, String(e)]));
    """, path)
    return int(result[0]), str(result[1])


def test_every_action_works_without_javascript(tmp_path: Path, redis_url: str) -> None:
    """Scripts off: log in, replay and delete a dead letter, pause and resume, all as
    plain forms; the overview shows its numbers, rendered on the server."""
    ids = seed_dead(redis_url)
    driver = chrome(tmp_path / "profile-nojs", javascript=False)
    try:
        (tmp_path / "web").mkdir()
        with console(tmp_path / "web", redis_url) as c:
            log_in(driver, c, "operator")
            assert by_id(driver, "backlog").text == "0"
            time.sleep(1.5)  # the live refresh would have run by now: it did not
            assert by_id(driver, "live").get_attribute("data-updated") is None
            driver.get(c.url + "/dead?kind=refund")
            [row] = all_css(driver, "#dead tbody tr[data-id]")
            row.find_element("css selector", "button.replay").click()
            wait(lambda: "replayed 1" in driver.find_element("css selector", ".flash").text)
            assert stream_orders(redis_url) == ["102"]
            driver.get(c.url + "/dead")
            all_css(driver, "button.delete")[0].click()
            wait(lambda: all_css(driver, "#confirm-delete"))[0].click()
            wait(lambda: "deleted 1" in driver.find_element("css selector", ".flash").text)
            assert ids["late1"] not in dead_ids(redis_url)  # the newest, first row
            # a stuck pending entry, dead-lettered after its confirm page (issue 38 item 8)
            client = redis.Redis.from_url(redis_url, protocol=2)
            try:  # the job replayed above, taken by a worker that never comes back
                [[_, [(stuck, _)]]] = client.xreadgroup("workers", "host-a", {"jobs": ">"},
                                                        count=1)
                stuck = stuck.decode()
            finally:
                client.close()
            driver.get(c.url + "/pending")
            buttons = all_css(driver, "#pending button.dead-letter")
            assert len(buttons) == 1
            buttons[0].click()
            entry = wait(lambda: all_css(driver, "#pending-entry"))[0]
            assert "host-a" in entry.text
            by_id(driver, "confirm-dead-letter").click()
            wait(lambda: f"dead-lettered {stuck}" in
                 driver.find_element("css selector", ".flash").text)
            assert len(dead_ids(redis_url)) == 5  # 6 seeded, 1 replayed, 1 deleted, + this one
            driver.get(c.url + "/fleet")
            by_id(driver, "pause").click()
            wait(lambda: by_id(driver, "fleet-state").text == "PAUSED")
            by_id(driver, "resume").click()
            wait(lambda: by_id(driver, "fleet-state").text == "running")
    finally:
        driver.quit()


def test_a_stuck_pending_entry_released_to_the_fleet_from_its_page(
        browser: Any, tmp_path: Path, redis_url: str) -> None:
    """Issue 38 item 8: a job read by a worker that never came back (host-a) waits for
    claim_idle_ms (10 minutes here); the operator opens its page from /pending, clicks
    "Release to the fleet now", confirms, and a live worker runs it; audited."""
    (entry,) = enqueue(redis_url, "noop", [3805])
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        client.execute_command("XREADGROUP", "GROUP", "workers", "host-a", "COUNT", 1,
                               "STREAMS", "jobs", ">")
    finally:
        client.close()
    sup = Sup(tmp_path, redis_url, ["--workers", "1", "--claim-idle-ms", "600000"]).start()
    try:
        (tmp_path / "web").mkdir()
        with console(tmp_path / "web", redis_url) as c:
            log_in(browser, c, "operator")
            browser.get(c.url + "/pending")
            [row] = all_css(browser, "#pending tbody tr")
            assert entry in row.text and "host-a" in row.text
            row.find_element("css selector", "a.entry-page").click()
            wait(lambda: browser.current_url.endswith(f"/pending/{entry}"), what="its page")
            assert "no live worker under this name" in by_id(browser, "owner").text
            assert by_id(browser, "dead-letter")  # the other action, beside it
            by_id(browser, "release").click()
            what = wait(lambda: all_css(browser, "#release-what"))[0].text
            assert "stays pending on host-a" in what
            time.sleep(0.5)  # the worker's reclaim passes ran: none took it
            assert not (sup.marks / "3805.log").exists()
            by_id(browser, "confirm-release").click()
            wait(lambda: f"released {entry} (pending on host-a)" in
                 browser.find_element("css selector", ".flash").text, what="the flash")
            wait(lambda: (sup.marks / "3805.log").exists() and
                 "done" in (sup.marks / "3805.log").read_text(), 20,
                 "a live worker to run it")
            browser.get(c.url + "/audit")
            rows = all_css(browser, "#audit tbody tr[data-id]")
            assert [r.find_element("css selector", ".action").text for r in rows] == [
                "release"]
            assert f"{entry} from host-a" in rows[0].text
    finally:
        sup.kill_all()


# -- metrics by kind -----------------------------------------------------------------------
def test_metrics_by_kind_opened_from_the_nav(browser: Any, tmp_path: Path,
                                             redis_url: str) -> None:
    """A viewer opens the Metrics tab from the nav after a worker drained two kinds, one
    of which fails for good: the table counts them and the plots are drawn."""
    enqueue(redis_url, "noop", range(1, 31))
    enqueue(redis_url, "refuse", range(1001, 1005))
    sup = Sup(tmp_path, redis_url, ["--workers", "1"], env={"SUP_TEST_SLOW": "0.02"}).start()
    try:
        def ran() -> bool:
            text = "".join(p.read_text() for p in sup.marks.glob("*.log"))
            return text.count("done ") == 30 and text.count("refused ") == 4
        wait(ran, 60, "30 jobs done and 4 refused")
        (tmp_path / "web").mkdir()
        with console(tmp_path / "web", redis_url) as c:
            log_in(browser, c, "viewer")
            browser.find_element("link text", "Metrics").click()
            wait(lambda: browser.current_url.endswith("/kinds"), 10, "the Metrics tab")

            def cell(kind: str, name: str) -> str:
                return str(browser.find_element(
                    "css selector", f'tr[data-kind="{kind}"] td.{name}').text)

            def counted() -> bool:
                # The page may come before the worker's beat added its counts to the
                # ring (no row for a kind yet): a person reloads until they show.
                rows = {r.get_attribute("data-kind") for r in
                        browser.find_elements("css selector", "tr[data-kind]")}
                if {"noop", "refuse"} <= rows and cell("noop", "handled") == "30" \
                        and cell("refuse", "dead") == "4":
                    return True
                browser.refresh()  # the tab is not live
                return False
            wait(counted, 20, "the tab to count every job")
            assert cell("noop", "failed") == "0" and cell("refuse", "handled") == "0"
            for kind in ("noop", "refuse"):
                for name in ("run-p50", "run-p95", "run-p99", "wait-p50", "wait-p99"):
                    assert cell(kind, name) != "-", (kind, name)
            chart = by_id(browser, "chart-jobs")
            assert chart.size["width"] == 600 and chart.is_displayed()
            lines = all_css(browser, "#chart-jobs polyline.handled")
            assert len(lines) == 2
            # the last minute of noop's line is up from the floor (30 jobs)
            tops = [min(float(p.split(",")[1]) for p in line.get_attribute("points").split())
                    for line in lines]
            assert min(tops) < 10
            assert all_css(browser, "#chart-p95 polyline")
    finally:
        sup.kill_all()
