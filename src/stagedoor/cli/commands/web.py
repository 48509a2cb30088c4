"""`stagedoor web`: the operator's console, a web page in a process of its own.

The parser lives here; the console (aiohttp, Jinja2: the `web` extra) is imported only
inside `run`, so no other command pays for it and a CLI without the extra works.
Exit 78 with one line for a bad setting (no password file, an empty one, TLS flags
without their pair, the extra not installed).  Redis away is not an exit: the page
says so and the next sample tries again.  Serves until SIGTERM or SIGINT.
docs/console.md has the whole story.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
from typing import Any
from urllib.parse import urlsplit

from ... import config
from ...config import ConfigError
from ...console.client import console_client
from ...telemetry.logs import setup_logging
from ..flags import given, refuse
from .status import CONNECTION_SETTINGS

DEFAULT_PORT = 8470


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "web", help="Serve the operator's console: an authenticated web page.",
        description="Serve the web console (overview, fleet, pending, dead letters, job "
                    "lookup, tickets) on 127.0.0.1 by default. Needs the web extra: "
                    "pip install 'stagedoor[web]'. Log in as viewer or operator with the "
                    "password in the role's file; only the operator acts.")
    # maxlen and the backlog fractions: a replay stops where enqueue refuses.
    config.add_arguments(p, only=(*CONNECTION_SETTINGS, "maxlen", "backlog_warn_fraction",
                                  "backlog_refuse_fraction", "dead_maxlen", "audit_maxlen",
                                  "tickets_dir", "log_format", "log_level"))
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on [default: 127.0.0.1: loopback only; put a TLS "
                   "reverse proxy in front, docs/console.md]")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help=f"port to listen on (0: any free one, printed) [default: {DEFAULT_PORT}]")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a host name browsers reach the console by (the Host header), "
                   "beside loopback's (127.0.0.1, localhost, ::1); repeat for more. Any "
                   "other Host is refused (DNS rebinding) [default: loopback, --host's "
                   "address and --public-origin's name]")
    p.add_argument("--viewer-password-file", metavar="FILE",
                   help="file holding the viewer's password on its one line, at least 12 "
                   "characters, not readable by others (the viewer sees everything, acts on "
                   "nothing)")
    p.add_argument("--operator-password-file", metavar="FILE",
                   help="file holding the operator's password on its one line, at least 12 "
                   "characters, not readable by others (the operator replays, deletes, "
                   "purges, pauses, resumes and downloads tickets)")
    p.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate "
                   "chain (PEM); with --tls-key")
    p.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    p.add_argument("--secure-cookies", action="store_true",
                   help="mark cookies Secure (behind a reverse proxy that terminates TLS; "
                   "implied by --tls-cert)")
    p.add_argument("--public-origin", metavar="URL",
                   help="the origin browsers use, e.g. https://ops.example.com: a POST whose "
                   "Origin header differs is refused [default: the request's own Host]")
    p.add_argument("--interval", type=_interval, default=1.0, metavar="SECONDS",
                   help="seconds between two samples of the queue (the overview's refresh) "
                   "[default: 1]")
    p.set_defaults(func=run, parser=p)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}")
    return value


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0.1 and 3600: {text!r}")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plain_http_warning(host: str, tls: bool, secure_cookies: bool) -> str | None:
    """The one line `stagedoor web` says when it serves plain HTTP beyond loopback."""
    if tls or _loopback(host):
        return None
    if secure_cookies:
        # --secure-cookies says a TLS proxy is in front; bound to every address, anyone
        # who reaches the port talks to the console past it, in clear
        return (f"serving plain HTTP on {host} with --secure-cookies: the TLS proxy it "
                "implies is bypassed by anyone who reaches this port directly, and the "
                "passwords cross the network in clear; bind --host 127.0.0.1 behind the "
                "proxy, or use --tls-cert")
    return (f"serving plain HTTP on {host}: passwords and cookies cross the network in "
            "clear; use --tls-cert or a TLS proxy")


def _host_name(text: str) -> str:
    name = text.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    if not name or any(c in name for c in "/@ \t") or (":" in name and not _is_ip(name)):
        raise argparse.ArgumentTypeError(f"not a host name: {text!r}")
    return name


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def allowed_hosts(args: argparse.Namespace) -> frozenset[str]:
    """Loopback's names, --allowed-host, --host when it names one address (not a
    wildcard) and the name of --public-origin."""
    # the web extra's package: never imported to build the parser (tests/web/test_web.py)
    from ...web.security import LOOPBACK_HOSTS

    names = set(LOOPBACK_HOSTS)
    for text in args.allowed_host:
        try:
            names.add(_host_name(text))
        except argparse.ArgumentTypeError as e:
            args.parser.error(f"--allowed-host: {e}")
    if args.host not in ("0.0.0.0", "::", ""):
        names.add(args.host.lower().strip("[]"))
    if args.public_origin:
        name = urlsplit(args.public_origin).hostname
        if not name:
            args.parser.error(f"--public-origin: not an origin: {args.public_origin!r}")
        names.add(name.lower())
    return frozenset(names)


def run(args: argparse.Namespace) -> int:
    if not args.tls_cert:
        refuse(args.parser, given(args, ("tls_key",)), "only with --tls-cert")
    if args.tls_cert and not args.tls_key:
        args.parser.error("--tls-cert needs --tls-key")
    hosts = allowed_hosts(args)
    settings = config.from_args(args)
    try:  # the extra: absent, one line and EX_CONFIG (installing it is the fix)
        from ...web import app as web_app
        from ...web import credentials
    except ImportError as e:
        raise ConfigError(f"the web console needs the web extra ({e.name} is missing): "
                          "pip install 'stagedoor[web]'") from None

    setup_logging(settings)  # log-ins, failed log-ins and every action, as the workers log
    creds = credentials.PasswordFiles({"viewer": args.viewer_password_file,
                                       "operator": args.operator_password_file})
    tls = None
    if args.tls_cert:
        try:
            tls = web_app.tls_context(args.tls_cert, args.tls_key)
        except (OSError, ValueError) as e:
            raise ConfigError(f"--tls-cert/--tls-key: {e}") from None
    if (warning := plain_http_warning(args.host, tls is not None, args.secure_cookies)):
        print(f"stagedoor web: warning: {warning}", file=sys.stderr)
    return asyncio.run(_serve(web_app, settings, creds, tls, args, hosts))


async def _serve(web_app: Any, settings: config.Settings, creds: Any, tls: Any,
                 args: argparse.Namespace, hosts: frozenset[str]) -> int:
    from ...web.sampler import Sampler, paused  # the web extra's: as run() imports it

    client = console_client(settings)
    sampler = Sampler(client, settings, interval=args.interval, extras={"paused": paused})
    console = web_app.Console(settings=settings, credentials=creds, client=client,
                              sampler=sampler,
                              secure_cookies=bool(tls) or args.secure_cookies,
                              public_origin=args.public_origin, allowed_hosts=hosts)
    await web_app.serve(web_app.build(console), args.host, args.port, tls)
    return 0
