"""`stagedoor web` closed to what is not its own (issue 38), on a real console and a
real Redis: Host names not configured (DNS rebinding), an Origin of another scheme,
log-in tokens a client made up, guesses in parallel, a flood of viewer log-ins, a
changed password, a viewer after the tickets; and the audit log of every operator
action, from the page and from the CLI."""

from __future__ import annotations

import http.client
import re
import threading
from pathlib import Path
from urllib.parse import quote, urlsplit

import redis

from tests.support.supervisor import wait_for
from tests.support.web import PASSWORDS, console
from tests.web.test_web import Http, run

AUDIT = "stagedoor:audit:jobs"


def csrf_of(page: bytes) -> str:
    token = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert token, page[:500]
    return token[1].decode()


def raw(c_url: str, method: str, path: str, headers: dict[str, str], body: str | None = None,
        source: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly these headers (Host included), from `source`."""
    u = urlsplit(c_url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port or 80, timeout=30,
                                      source_address=(source, 0) if source else None)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        h = dict(headers)
        if body is not None:
            h["Content-Type"] = "application/x-www-form-urlencoded"
            h["Content-Length"] = str(len(body.encode()))
        for k, v in h.items():
            conn.putheader(k, v)
        conn.endheaders(body.encode() if body is not None else None)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def audit(redis_url: str) -> list[dict[str, str]]:
    client = redis.Redis.from_url(redis_url, protocol=2, decode_responses=True)
    try:
        return [f for _, f in client.xrange(AUDIT)]
    finally:
        client.close()


def test_only_configured_host_names_are_served(tmp_path: Path, redis_url: str) -> None:
    """DNS rebinding: evil.example resolved to this console sends Host and Origin
    evil.example:<port>; today that logged in and paused the fleet."""
    with console(tmp_path, redis_url, ["--allowed-host", "ops.example"]) as c:
        port = urlsplit(c.url).port
        evil = f"evil.example:{port}"
        cookie_jar = Http(c.url)
        cookie_jar.log_in("operator")  # a real operator session, as the browser has it
        cookies = "; ".join(f"{k}={v}" for k, v in cookie_jar.cookies.items())
        page = cookie_jar.request("GET", "/fleet")[2]
        for method, path, body in (("GET", "/login", None), ("GET", "/healthz", None),
                                   ("POST", "/pause", f"csrf={csrf_of(page)}&reason=x"),
                                   ("POST", "/login", "username=operator&password=x")):
            status, headers, text = raw(c.url, method, path, {
                "Host": evil, "Origin": f"http://{evil}", "Cookie": cookies}, body)
            assert status == 421 and b"unknown Host" in text, (path, status, text[:200])
            assert "default-src 'none'" in headers["content-security-policy"]
        for bad_host in ("", "127.0.0.1.evil.example", "localhost:x", "[::1"):
            assert raw(c.url, "GET", "/login", {"Host": bad_host})[0] == 421, bad_host
        # the names configured: loopback's and --allowed-host's, any port
        for good in (f"127.0.0.1:{port}", f"localhost:{port}", f"OPS.example:{port}",
                     "ops.example"):
            assert raw(c.url, "GET", "/login", {"Host": good})[0] == 200, good
        # the Origin must be this console's own, scheme included
        status, _, text = raw(c.url, "POST", "/pause", {
            "Host": f"127.0.0.1:{port}", "Origin": f"https://127.0.0.1:{port}",
            "Cookie": cookies}, f"csrf={csrf_of(page)}&reason=x")
        assert status == 403 and b"Origin" in text
        client = redis.Redis.from_url(redis_url, protocol=2)
        try:
            assert client.keys("stagedoor:paused:*") == []
        finally:
            client.close()


def test_a_login_token_the_client_made_up_is_refused(tmp_path: Path, redis_url: str) -> None:
    with console(tmp_path, redis_url) as c:
        h = Http(c.url)
        made_up = "A" * 43  # the shape the console's own tokens had
        h.cookies["sd_login"] = made_up
        status, _, page = h.request("GET", "/login")
        assert made_up.encode() not in page  # replaced by one the console issued
        h.cookies["sd_login"] = made_up
        status, _, _ = h.request("POST", "/login", f"csrf={made_up}&username=operator&"
                                 f"password={PASSWORDS['operator']}")
        assert status == 403 and "sd_session" not in h.cookies
        h.log_in("operator")  # the issued one works
        assert "sd_session" in h.cookies


def test_the_login_page_does_not_list_the_roles(tmp_path: Path, redis_url: str) -> None:
    """Issue 38 item 8: the log-in page offered a list of the roles (its <option>s),
    telling anyone who reaches it which user names exist.  A text field instead; the
    operator still logs in by typing the name."""
    with console(tmp_path, redis_url) as c:
        h = Http(c.url)
        status, _, page = h.request("GET", "/login")
        assert status == 200
        assert b"<option" not in page and b"<select" not in page
        assert b"operator" not in page.lower() and b"viewer" not in page.lower()
        assert re.search(rb'<input type="text" name="username"', page)
        h.log_in("operator")
        assert "sd_session" in h.cookies


def _guess(c_url: str, token: str, source: str | None, out: list[int]) -> None:
    status, _, _ = raw(c_url, "POST", "/login", {
        "Host": urlsplit(c_url).netloc, "Cookie": f"sd_login={token}"},
        f"csrf={token}&username=operator&password=wrong-guess", source=source)
    out.append(status)


def _token(c_url: str) -> str:
    h = Http(c_url)
    h.request("GET", "/login")
    return h.cookies["sd_login"]


def test_guesses_in_parallel_are_throttled_per_source_and_in_all(
        tmp_path: Path, redis_url: str) -> None:
    """50 parallel guesses from one address: a handful checked (401), the rest 429
    with Retry-After and the password not looked at; then 60 from 30 addresses: the
    console's own budget caps them.  (The rate: bench/measure_login_throttle.py.)"""
    with console(tmp_path, redis_url) as c:
        token = _token(c.url)
        statuses: list[int] = []
        threads = [threading.Thread(target=_guess, args=(c.url, token, None, statuses))
                   for _ in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(statuses) == 50 and set(statuses) <= {401, 429}, statuses
        assert statuses.count(401) <= 8, statuses  # the burst of 5, a token or two refilled
        status, headers, page = raw(c.url, "POST", "/login", {
            "Host": urlsplit(c.url).netloc, "Cookie": f"sd_login={token}"},
            f"csrf={token}&username=operator&password=wrong-guess")
        assert status == 429 and int(headers["retry-after"]) >= 1
        assert b"too many log-in attempts" in page
        spread: list[int] = []
        threads = [threading.Thread(target=_guess, args=(c.url, token, f"127.0.0.{2 + n // 2}",
                                                          spread)) for n in range(60)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(spread) == 60 and spread.count(401) <= 26, spread  # 20 and the refill
        log = c.stderr()
        assert "log-in throttled for 127.0.0.1" in log
        # a line a minute a source, with the count: not one a refusal
        assert log.count("log-in throttled for 127.0.0.1 ") == 1, log[-3000:]


def test_a_viewer_flood_does_not_log_the_operator_out(tmp_path: Path, redis_url: str) -> None:
    with console(tmp_path, redis_url) as c:
        operator = Http(c.url)
        operator.log_in("operator")
        token = _token(c.url)
        u = urlsplit(c.url)
        conn = http.client.HTTPConnection(u.hostname or "", u.port or 80, timeout=30)
        body = f"csrf={token}&username=viewer&password={quote(PASSWORDS['viewer'])}"
        try:
            for _ in range(1001):
                conn.request("POST", "/login", body, {
                    "Cookie": f"sd_login={token}",
                    "Content-Type": "application/x-www-form-urlencoded"})
                r = conn.getresponse()
                r.read()
                assert r.status == 303
        finally:
            conn.close()
        status, _, page = operator.request("GET", "/fleet")
        assert status == 200 and b'id="pause"' in page  # still logged in, as operator


def test_a_changed_password_ends_the_roles_sessions(tmp_path: Path, redis_url: str) -> None:
    with console(tmp_path, redis_url) as c:
        viewer, operator = Http(c.url), Http(c.url)
        viewer.log_in("viewer")
        operator.log_in("operator")
        f = tmp_path / "operator-password"
        f.write_text("a-new-operator-password\n")
        wait_for(lambda: operator.request("GET", "/fleet")[0] == 303, 10,
                 what="the operator's session to end")
        assert viewer.request("GET", "/fleet")[0] == 200  # another role's: untouched
        h = Http(c.url)
        _, _, page = h.request("GET", "/login")
        status, _, _ = h.request("POST", "/login", f"csrf={csrf_of(page)}&username=operator&"
                                 "password=a-new-operator-password")
        assert status == 303 and h.request("GET", "/fleet")[0] == 200
        assert "the operator password file changed" in c.stderr()


def test_tickets_are_for_the_operator_and_every_download_is_audited(
        tmp_path: Path, redis_url: str) -> None:
    with console(tmp_path, redis_url) as c:
        for n in range(1, 4):
            (c.tickets / f"order-{n}.pdf").write_bytes(b"%PDF-1.4 ticket\n%%EOF\n")
        viewer = Http(c.url)
        viewer.log_in("viewer")
        for n in range(1, 4):  # counting order ids gets a viewer nothing
            status, _, body = viewer.request("GET", f"/ticket/{n}")
            assert status == 403 and b"only the operator" in body
        assert audit(redis_url) == []
        operator = Http(c.url)
        operator.log_in("operator")
        assert operator.request("GET", "/ticket/2")[0] == 200
        assert operator.request("GET", "/ticket/9")[0] == 404  # nothing served: not recorded
        [entry] = audit(redis_url)
        assert entry["action"] == "ticket download" and entry["count"] == "1"
        assert entry["detail"] == "order-2.pdf" and entry["via"] == "web"
        assert entry["who"] == "operator@127.0.0.1"
        assert "audit: ticket download 1 by operator@127.0.0.1 via web (order-2.pdf)" \
            in c.stderr()


def test_every_operator_action_is_audited_from_the_page_and_the_cli(
        tmp_path: Path, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        dead = [client.xadd("jobs:dead", {"kind": "noop", "order_id": str(n),
                                          "outbox_id": str(n), "request_id": "r",
                                          "trace": "t", "dead:error": "e"}).decode()
                for n in range(5)]
    finally:
        client.close()
    with console(tmp_path, redis_url, ["--audit-maxlen", "1000"]) as c:
        h = Http(c.url)
        h.log_in("operator")
        token = csrf_of(h.request("GET", "/fleet")[2])
        for path, body in (("/pause", "reason=maintenance"), ("/resume", ""),
                           ("/dead/replay", f"id={dead[0]}&id={dead[1]}"),
                           ("/dead/delete", f"id={dead[2]}&confirm=1"),  # the confirm step's POST
                           ("/dead/bulk", f"action=purge&confirm=1&upto={dead[3]}")):
            status, _, text = h.request("POST", path, f"csrf={token}&{body}")
            assert status == 303, (path, status, text[:300])
        base = ["--redis-url", redis_url]
        assert run("pause", *base, "--reason", "cli").returncode == 0
        assert run("resume", *base).returncode == 0
        r = run("dead", "delete", *base, dead[4])
        assert r.returncode == 0, r.stderr
        # the CLI's log line: on stderr (not a terminal here: JSON), stdout its own
        assert '"audit_action":"delete"' in r.stderr and '"audit_via":"cli"' in r.stderr
        assert "audit" not in r.stdout
        entries = audit(redis_url)
        assert [(e["action"], e["count"], e["via"]) for e in entries] == [
            ("pause", "1", "web"), ("resume", "1", "web"), ("replay", "2", "web"),
            ("delete", "1", "web"), ("purge", "1", "web"),
            ("pause", "1", "cli"), ("resume", "1", "cli"), ("delete", "1", "cli")]
        assert entries[0]["detail"] == "maintenance"
        assert entries[2]["detail"] == f"{dead[0]} {dead[1]}"
        assert entries[5]["who"].endswith("@" + __import__("socket").gethostname())
        # the audit page shows them, newest first
        status, _, page = h.request("GET", "/audit")
        rows = re.findall(rb'<td class="action">([^<]*)</td>', page)
        assert status == 200 and rows[0] == b"delete" and len(rows) == 8, page[-2000:]
        viewer = Http(c.url)
        viewer.log_in("viewer")
        assert viewer.request("GET", "/audit")[0] == 200


def test_requests_aiohttp_cannot_parse_get_the_headers_and_no_banner(
        tmp_path: Path, redis_url: str) -> None:
    """A malformed header line, a header over the size limit: aiohttp answers these
    itself, before any middleware; they said `Server: Python/3.x aiohttp/3.x` and
    carried no CSP."""
    import socket

    with console(tmp_path, redis_url) as c:
        port = urlsplit(c.url).port or 0
        for request in (b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n",
                        b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 20000
                        + b"\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
                s.sendall(request)
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    head += chunk
            lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":")
                                                          for ln in lines[1:])}
            assert lines[0].split()[1] == "400", lines
            assert headers["server"] == "stagedoor", headers
            assert "default-src 'none'" in headers["content-security-policy"]
            assert headers["x-content-type-options"] == "nosniff"
