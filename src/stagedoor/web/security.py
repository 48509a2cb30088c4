"""Sessions, CSRF tokens and the headers every response carries.

Sessions.  A log-in makes a random 256-bit session id, kept in this process's memory
with the role and a CSRF token of its own; the browser holds only the id, in a cookie
that is HttpOnly, SameSite=Strict and (with TLS, or --secure-cookies behind a TLS
proxy) Secure.  A restart of the console logs everyone out; log-out forgets the id.
A session ends after IDLE_SECONDS without a request.

CSRF.  Every POST carries the session's token in a hidden form field (`csrf`), compared
in constant time; the log-in form, which has no session yet, carries a token bound to
a pre-session cookie (double submit).  On top, a POST whose Origin header names
another site is refused (SameSite=Strict already keeps the cookie off such requests).

Headers.  Every response gets a strict Content-Security-Policy: nothing but this
origin's own script, style and images; no inline script or style, no eval, no
frames, no plugins, forms only to this origin.  The pages have no inline script or
style attribute to allow (the SVG chart uses presentation attributes, which CSP does
not govern).
"""

from __future__ import annotations

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
MAX_SESSIONS = 1000  # a flood of log-ins cannot grow memory without bound


@dataclass
class Session:
    role: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    seen: float = field(default_factory=time.monotonic)
    flash: list[tuple[str, str]] = field(default_factory=list)  # shown once, next page


class Sessions:
    """The live sessions of this process, by id."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self.idle = idle_seconds
        self._by_id: dict[str, Session] = {}

    def create(self, role: str) -> tuple[str, Session]:
        self._expire()
        if len(self._by_id) >= MAX_SESSIONS:  # drop the least recently seen
            oldest = min(self._by_id, key=lambda k: self._by_id[k].seen)
            del self._by_id[oldest]
        sid = secrets.token_urlsafe(32)
        session = self._by_id[sid] = Session(role)
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


def origin_allowed(origin: str | None, host: str | None, public_origin: str | None) -> bool:
    """A POST's Origin: absent (old browsers, curl) is left to the token; present, it
    must be --public-origin when set, else this request's own scheme-less Host."""
    if origin is None:
        return True
    if public_origin:
        return origin.rstrip("/") == public_origin.rstrip("/")
    if origin == "null" or not host:
        return False
    _, _, rest = origin.partition("://")
    return rest == host
