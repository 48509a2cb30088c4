"""Credentials and TLS for every Redis connection of the worker, written once.

Both kinds of connection use this module: the redis-py clients (connection.py) and
the lean hot-path connection (resp.py).

- password(settings): the password file (--redis-password-file, systemd's
  LoadCredential=), read at every connect so a rotated file is picked up; an
  unreadable file is a ConfigError (exit 78).
- credentials(settings, url_options): (username, password) for AUTH: the user name
  from the URL, the password from the file, else from the URL.
- tls_context(url_options): the SSLContext for a rediss:// URL, from the query options
  redis-py takes (ssl_ca_certs, ssl_ca_path, ssl_certfile, ssl_keyfile,
  ssl_password, ssl_cert_reqs, ssl_check_hostname).  Built once per process and set
  of options and shared by every connection: building one loads the system CA store,
  ~0.13 s of CPU, which per connection (redis-py's default) stalls the event loop when
  8 jobs arrive on a cold pool.  Given a CA (ssl_ca_certs/ssl_ca_path), only that CA
  is trusted; else the system store.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..config import ConfigError, Settings
from ..redaction import remember

TLS_OPTIONS = ("ssl_ca_certs", "ssl_ca_path", "ssl_certfile", "ssl_keyfile", "ssl_password",
               "ssl_cert_reqs", "ssl_check_hostname")

_contexts: dict[tuple[tuple[str, str], ...], ssl.SSLContext] = {}
_contexts_lock = threading.Lock()  # redis-py's sync clients may connect from threads


def password(settings: Settings) -> str | None:
    """The password from redis_password_file, or None when there is no file."""
    if not settings.redis_password_file:
        return None
    return read_password_file(settings.redis_password_file, "redis_password_file")


def read_password_file(path: str, setting: str) -> str:
    """A password file's content, stripped; one line naming the setting when unreadable.
    The master's password and the sentinels' own both come through here."""
    try:
        secret = Path(path).read_text().strip()
    except OSError as e:
        raise ConfigError(f"{setting}={path!r}: {e.strerror}") from None
    remember(secret)  # masked wherever it might appear in an output (redaction.py)
    return secret


def credentials(settings: Settings, url_options: Mapping[str, Any]
                ) -> tuple[str | None, str | None]:
    """(username, password) to AUTH with: the file's password wins over the URL's."""
    username = url_options.get("username")
    return (unquote(username) if username else None,
            password(settings) or url_options.get("password"))


def _truthy(value: Any) -> bool:
    return str(value).lower() not in ("0", "false", "no", "off", "")


def _build(options: Mapping[str, Any]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=options.get("ssl_ca_certs"),
                                     capath=options.get("ssl_ca_path"))
    if options.get("ssl_certfile"):
        ctx.load_cert_chain(options["ssl_certfile"], options.get("ssl_keyfile"),
                            options.get("ssl_password"))
    reqs = str(options.get("ssl_cert_reqs", "required")).lower()
    if "ssl_check_hostname" in options:
        ctx.check_hostname = _truthy(options["ssl_check_hostname"])
    if reqs == "none":
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif reqs == "optional":
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def tls_context(options: Mapping[str, Any]) -> ssl.SSLContext:
    """The shared context for these TLS options (any other keys are ignored)."""
    key = tuple(sorted((k, str(v)) for k, v in options.items()
                       if k in TLS_OPTIONS and v is not None))
    with _contexts_lock:
        context = _contexts.get(key)
        if context is None:
            context = _contexts[key] = _build(options)
    return context


def add_url_auth(out: dict[str, Any], target: Any) -> dict[str, Any]:
    """Put a parsed Sentinel or Cluster URL's user, password and TLS options into a
    redis-py client's keyword arguments (a password already there, from a password
    file, wins)."""
    if target.username:
        out["username"] = target.username
    if target.password and "password" not in out:
        out["password"] = target.password
    if target.tls:
        out["ssl"] = True
        out.update({k: v for k, v in target.options.items() if k.startswith("ssl_")})
    return out
