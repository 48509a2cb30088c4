"""Sessions, CSRF tokens and the headers every response carries.

Sessions.  A log-in makes a random 256-bit session id, kept in this process's memory
with the role and a CSRF token of its own; the browser holds only the id, in a cookie
that is HttpOnly, SameSite=Strict and (with TLS, or --secure-cookies behind a TLS
proxy) Secure.  A restart of the console logs everyone out; log-out forgets the id.
A session ends after IDLE_SECONDS without a request, and when its role's password
changes (the session keeps the stamp of the password it logged in with).  The cap on
live sessions is per role: a flood of viewer log-ins evicts old viewer sessions, never
the operator's.

CSRF.  Every POST carries the session's token in a hidden form field (`csrf`), compared
in constant time; the log-in form, which has no session yet, carries a token bound to
a pre-session cookie (double submit).  That token is made and signed by this process
(LoginTokens): one a client made up, or one older than an hour, is refused.  On top,
a POST whose Origin header is not this console's own origin, scheme included, is
refused (SameSite=Strict already keeps the cookie off such requests).

Hosts.  Only the host names configured are served (loopback by default,
--allowed-host for more): a page of another site whose name was made to resolve to
this address (DNS rebinding) sends its own name in Host and is refused before
anything else, so neither its Host nor an Origin of the same name get anywhere.

Headers.  Every response gets a strict Content-Security-Policy: nothing but this
origin's own script, style and images; no inline script or style, no eval, no
frames, no plugins, forms only to this origin.  The pages have no inline script or
style attribute to allow (the SVG chart uses presentation attributes, which CSP does
not govern).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
       "object-src 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # no-referrer would make a POST's Origin "null"
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
SESSION_COOKIE = "sd_session"
PRE_COOKIE = "sd_login"
IDLE_SECONDS = 8 * 3600
MAX_SESSIONS = 1000  # per role: a flood of log-ins cannot grow memory without bound
LOGIN_TOKEN_SECONDS = 3600  # a log-in form is good for an hour
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass
class Session:
    role: str
    stamp: bytes = b""  # the stamp of the role's password at log-in (Credentials.stamp)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    seen: float = field(default_factory=time.monotonic)
    flash: list[tuple[str, str]] = field(default_factory=list)  # shown once, next page


class Sessions:
    """The live sessions of this process, by id."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self.idle = idle_seconds
        self._by_id: dict[str, Session] = {}

    def create(self, role: str, stamp: bytes = b"") -> tuple[str, Session]:
        self._expire()
        mine = [k for k, s in self._by_id.items() if s.role == role]
        if len(mine) >= MAX_SESSIONS:  # drop the role's least recently seen: never another's
            oldest = min(mine, key=lambda k: self._by_id[k].seen)
            del self._by_id[oldest]
        sid = secrets.token_urlsafe(32)
        session = self._by_id[sid] = Session(role, stamp)
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        session = self._by_id.get(sid)
        now = time.monotonic()
        if session is None or now - session.seen > self.idle:
            self._by_id.pop(sid, None)
            return None
        session.seen = now
        return session

    def drop(self, sid: str | None) -> None:
        if sid:
            self._by_id.pop(sid, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for sid in [k for k, s in self._by_id.items() if now - s.seen > self.idle]:
            del self._by_id[sid]


def same_token(given: str | None, want: str | None) -> bool:
    """Constant-time comparison of two tokens; an absent one never matches."""
    if not given or not want:
        return False
    return hmac.compare_digest(given.encode(), want.encode())


class LoginTokens:
    """The log-in form's CSRF tokens: `<issued>.<nonce>.<mac>`, the MAC a keyed BLAKE2b of
    the rest under a key of this process, so only a token this console issued, less than
    LOGIN_TOKEN_SECONDS ago, is good (a restart voids the open forms, as it does the
    sessions)."""

    def __init__(self, lifetime: float = LOGIN_TOKEN_SECONDS) -> None:
        self._key = secrets.token_bytes(32)
        self.lifetime = lifetime

    def _mac(self, body: str) -> str:
        return hashlib.blake2b(body.encode(), key=self._key, digest_size=16).hexdigest()

    def issue(self) -> str:
        body = f"{int(time.time())}.{secrets.token_urlsafe(24)}"
        return f"{body}.{self._mac(body)}"

    def valid(self, token: str | None) -> bool:
        if not token or len(token) > 200:
            return False
        body, _, mac = token.rpartition(".")
        issued, _, _ = body.partition(".")
        if not issued.isdigit() or not hmac.compare_digest(mac.encode(),
                                                           self._mac(body).encode()):
            return False
        return 0 <= time.time() - int(issued) < self.lifetime


def host_name(host: str | None) -> str | None:
    """The name of a Host header without its port ("[::1]:8470" -> "::1"), lower case;
    None for an absent or malformed one."""
    if not host:
        return None
    host = host.strip().lower()
    if host.startswith("["):
        name, sep, rest = host[1:].partition("]")
        if not sep or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name
    name, sep, port = host.partition(":")
    if sep and not port.isdigit():
        return None
    return name.rstrip(".") or None


def host_allowed(host: str | None, allowed: frozenset[str]) -> bool:
    name = host_name(host)
    return name is not None and name in allowed


def origin_allowed(origin: str | None, host: str | None, public_origin: str | None,
                   scheme: str = "http") -> bool:
    """A POST's Origin: absent (old browsers, curl) is left to the token; present, it
    must be --public-origin when set, else this console's own origin: `scheme` (https
    with TLS or behind a TLS proxy, --secure-cookies) and this request's Host (an
    allowed one: the host check ran first)."""
    if origin is None:
        return True
    if public_origin:
        return origin.rstrip("/") == public_origin.rstrip("/")
    if origin == "null" or not host:
        return False
    return origin == f"{scheme}://{host}"
