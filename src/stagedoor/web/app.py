"""The aiohttp application: middlewares (headers, authentication, CSRF), routes, serving.

Requests pass, in order: `headers` (the security headers of security.HEADERS on every
response, errors included), `hosts` (a Host name not configured: 421, nothing else
looked at), `authenticate` (a session whose role's password is unchanged, else the
log-in page for a page, 401 for /api), `csrf` (every POST: the Origin check, scheme
included, and the session's token), `outage` (Redis away: 503 and one line).
Actions are operator-only (views.operator_only); the viewer never sees their forms,
and a viewer's POST is refused with 403 all the same.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import redis
from aiohttp import web

from ..stream.errors import OUTAGE_ERRORS, first_line, outage_line
from . import security, views
from .console import Console, console_of

log = logging.getLogger("stagedoor.web")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PUBLIC = ("/login", "/static/", "/healthz", "/favicon.ico")
SERVER = "stagedoor"


@web.middleware
async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as e:
        _set_headers(request, e, started)
        raise
    _set_headers(request, response, started)
    return response


class _ErrorHeaders(web.RequestHandler):
    """aiohttp's own error responses (a request it cannot parse: 400, 431; a handler
    that raised something unforeseen: 500) never pass the middlewares: without this
    they carry none of the security headers and `Server: Python/3.x aiohttp/3.x`."""

    __slots__ = ()

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        response = super().handle_error(request, status, exc, message)
        response.headers["Server"] = SERVER
        for name, value in security.HEADERS.items():
            response.headers.setdefault(name, value)
        response.headers.setdefault("Cache-Control", "no-store")
        return response


class _Server(web.Server):
    def __call__(self) -> web.RequestHandler:
        return _ErrorHeaders(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    """AppRunner whose connections answer errors with _ErrorHeaders (aiohttp has no
    hook for those responses; its Server keeps no per-instance state of its own that a
    subclass would miss)."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server
        return server


def _set_headers(request: web.Request, response: web.StreamResponse, started: float) -> None:
    # the time the console spent on the request (bench/measure_console.py reads it)
    response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.2f}"
    response.headers["Server"] = SERVER  # not the framework's name and version
    for name, value in security.HEADERS.items():
        response.headers.setdefault(name, value)
    if not request.path.startswith("/static/"):
        response.headers.setdefault("Cache-Control", "no-store")
    if request.secure or console_of(request).secure_cookies:
        response.headers.setdefault("Strict-Transport-Security", "max-age=31536000")


@web.middleware
async def outage(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Redis away or refusing during a page: 503 with one line (the URL redacted), not
    a 500 and a traceback; the overview keeps showing its last sample and the error."""
    try:
        return await handler(request)
    except OUTAGE_ERRORS as e:
        line = outage_line(console_of(request).settings.redis_url, e)
    except redis.ResponseError as e:
        line = f"Redis refused: {first_line(e)}"
    log.warning("%s %s: %s", request.method, request.path, line)
    raise web.HTTPServiceUnavailable(text=f"{line}\n")


@web.middleware
async def hosts(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Only the configured Host names (DNS rebinding: security.py, "Hosts")."""
    if not security.host_allowed(request.headers.get("Host"),
                                 console_of(request).allowed_hosts):
        raise web.HTTPMisdirectedRequest(
            text="unknown Host: this console serves only its configured host names "
                 "(--allowed-host)\n")
    return await handler(request)


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path.startswith(PUBLIC):
        return await handler(request)
    console = console_of(request)
    sid = request.cookies.get(security.SESSION_COOKIE)
    session = console.sessions.get(sid)
    if session is not None and not security.same_token(
            session.stamp.hex(), console.credentials.stamp(session.role).hex()):
        console.sessions.drop(sid)  # the role's password changed: log in again
        session = None
    if session is None:
        if request.path.startswith("/api/") or request.method != "GET":
            raise web.HTTPUnauthorized(text="log in first\n")
        raise web.HTTPSeeOther("/login")
    request["session"] = session
    return await handler(request)


@web.middleware
async def csrf(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method in ("GET", "HEAD"):
        return await handler(request)
    if request.method != "POST":
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD", "POST"])
    console = console_of(request)
    scheme = "https" if request.secure or console.secure_cookies else "http"
    if not security.origin_allowed(request.headers.get("Origin"), request.host,
                                   console.public_origin, scheme):
        raise web.HTTPForbidden(text="cross-site request refused (Origin)\n")
    form = await request.post()
    token = form.get("csrf")
    token = token if isinstance(token, str) else None
    if request.path == "/login":  # the token this console issued to this browser
        want = request.cookies.get(security.PRE_COOKIE)
        if not console.login_tokens.valid(want):
            want = None
    else:
        session = request.get("session")
        want = session.csrf if session is not None else None
    if not security.same_token(token, want):
        raise web.HTTPForbidden(text="missing or wrong CSRF token: reload the page\n")
    return await handler(request)


async def static(request: web.Request) -> web.StreamResponse:
    """The two shipped files (package data), by exact name: nothing else is served."""
    name = request.match_info["name"]
    kinds = {"console.js": "text/javascript", "console.css": "text/css"}
    if name not in kinds:
        raise web.HTTPNotFound()
    body = resources.files("stagedoor.web").joinpath("static", name).read_bytes()
    return web.Response(body=body, content_type=kinds[name], charset="utf-8",
                        headers={"Cache-Control": "max-age=300"})


async def healthz(request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok\n")


def build(console: Console) -> web.Application:
    app = web.Application(middlewares=[headers, hosts, authenticate, csrf, outage],
                          client_max_size=64 * 1024)
    app["console"] = console
    views.add_routes(app)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/healthz", healthz)

    async def on_startup(app: web.Application) -> None:
        await console.sampler.refresh()  # the first page has numbers
        console.sampler.start()

    async def on_cleanup(app: web.Application) -> None:
        await console.sampler.stop()
        await console.client.aclose()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


async def serve(app: web.Application, host: str, port: int,
                tls: ssl.SSLContext | None) -> None:
    """Serve until SIGTERM or SIGINT; say where on stderr (port 0: the one picked)."""
    runner = _Runner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=tls, reuse_address=True)
        await site.start()
        server: Any = site._server
        bound = server.sockets[0].getsockname()[1] if server and server.sockets else port
        scheme = "https" if tls else "http"
        shown = f"[{host}]" if ":" in host else host
        print(f"stagedoor web: serving on {scheme}://{shown}:{bound}/", file=sys.stderr,
              flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()
