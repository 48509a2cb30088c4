"""Secrets out of every output: the one function that masks them, and what it knows.

Every text that can carry a Redis URL or a redis-py error on its way out (a log
line, a traceback, a CLI error, a config error, `status`) goes through `redact`:

- a URL's userinfo password: redis://user:secret@host -> redis://user:***@host.  The
  userinfo runs to the LAST @ of the URL, so a password with an unencoded @, /, # or
  ? (which urlsplit would read as a path, query or fragment) is masked whole;
- a password in the query, which redis-py accepts (?password=, and any option whose
  name ends in password: ssl_password, sentinel_password): the value, up to the next
  & or the end of the URL, becomes ***;
- any secret the process has been given and registered (`remember`): the passwords of
  the password files and of the URL as redis-py reads them (decoded), in clear and
  percent-encoded, wherever they appear, so a password that an odd URL put in a
  place the rules above do not see (an unencoded & or space) is masked too.
  Secrets shorter than MIN_SECRET characters are not masked by value (masking every
  "ab" in a log would garble it; such a password is not a secret anyway).

User names stay visible (redis://ops:***@host): they name the ACL user, which an
operator needs to read the error, and are not secret.

This module imports nothing of stagedoor, so the config, the logs and the CLI can all
use it without import cycles.
"""

from __future__ import annotations

import re
import sys
import threading
import traceback
from types import TracebackType
from urllib.parse import quote, unquote

MIN_SECRET = 4
MASK = "***"

# A URL's scheme and the rest of it up to a space, a quote or an angle bracket (the ends
# of a URL inside a message or a repr).
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>]*)")
# A query option whose name ends in "password", its value up to the next &.
_QUERY_PASSWORD = re.compile(r"(?i)(?P<key>[?&;][A-Za-z0-9_]*password=)[^&]*")

_secrets: set[str] = set()
_lock = threading.Lock()


def remember(*secrets: str | None) -> None:
    """Register secrets this process holds, so `redact` masks them wherever they appear."""
    for secret in secrets:
        if not secret or len(secret) < MIN_SECRET:
            continue
        with _lock:
            _secrets.update({secret, quote(secret, safe=""), quote(secret)})


def _url(match: re.Match[str]) -> str:
    rest = _QUERY_PASSWORD.sub(lambda m: m["key"] + MASK, match["rest"])
    userinfo, at, hostpart = rest.rpartition("@")
    if at and ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        if any(c in user for c in "/?#"):  # not a user name: a host or path before it
            user = ""
        rest = f"{user}:{MASK}@{hostpart}"
    return match["scheme"] + rest


def redact(text: str) -> str:
    """text with every secret masked (see the module docstring)."""
    if "://" in text:
        text = _URL.sub(_url, text)
    if _secrets:
        with _lock:
            known = sorted(_secrets, key=len, reverse=True)
        for secret in known:
            if secret in text:
                text = text.replace(secret, MASK)
    return text


def remember_url(url: str) -> None:
    """Register the passwords of a Redis URL: its userinfo's and its query's, as given and
    decoded (redis-py decodes them, and a decoded one can show up in its errors)."""
    for match in _URL.finditer(url):
        rest = match["rest"]
        userinfo, at, _ = rest.rpartition("@")
        if at and ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            remember(password, unquote(password))
        for value in re.findall(r"(?i)[?&;][A-Za-z0-9_]*password=([^&]*)", rest):
            remember(value, unquote(value))


def print_exception(exc_type: type[BaseException], exc: BaseException,
                    tb: TracebackType | None) -> None:
    """sys.excepthook that redacts: an unforeseen traceback must not print a password."""
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    sys.stderr.write(redact(text))
    sys.stderr.flush()


def install_excepthook() -> None:
    sys.excepthook = print_exception
