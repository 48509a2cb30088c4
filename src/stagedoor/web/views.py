"""The pages and the actions.  Queries and actions are ops/ functions (the CLI's too);
this module only reads forms, calls them and renders templates.

Every value shown comes from Redis (the stream, a dead letter, an order) and is hostile:
templates print it with Jinja2's autoescape, the script sets it with textContent, and
nothing from Redis ever lands in a URL path, an attribute without quotes, a script or
a style.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from ..handlers.files import OutsideTicketsDir, confined
from . import security
from .app import Console, console_of
from .credentials import ACTS

log = logging.getLogger("stagedoor.web")
FAILED_LOGIN_DELAY = 0.5  # seconds; a guess costs the guesser, not the server
ORDER_ID = re.compile(r"[0-9]{1,19}")
MAX_PDF = 64 * 1024 * 1024
View = Callable[[web.Request], Awaitable[web.StreamResponse]]


def page(request: web.Request, name: str, status: int = 200, **context: Any) -> web.Response:
    console = console_of(request)
    session = request.get("session")
    flash: list[tuple[str, str]] = []
    if session is not None:
        flash, session.flash = session.flash, []
    html = console.templates.get_template(name).render(
        role=session.role if session else None,
        can_act=bool(session and session.role in ACTS),
        csrf=session.csrf if session else "", flash=flash, path=request.path,
        settings=console.settings, **context)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


def tell(request: web.Request, kind: str, message: str) -> None:
    """A message for the next page this session sees (after the redirect of an action)."""
    session = request["session"]
    session.flash.append((kind, message))


def operator_only(view: View) -> View:
    async def guarded(request: web.Request) -> web.StreamResponse:
        session = request.get("session")
        if session is None or session.role not in ACTS:
            raise web.HTTPForbidden(text="only the operator may do this\n")
        log.info("action %s by %s", request.path, session.role)
        return await view(request)
    return guarded


# -- log-in ----------------------------------------------------------------------------------
async def login_form(request: web.Request, error: str | None = None,
                     status: int = 200) -> web.StreamResponse:
    console = console_of(request)
    token = secrets.token_urlsafe(32)
    response = page(request, "login.html", status=status, login_csrf=token, error=error,
                    roles=console.credentials.roles)
    response.set_cookie(security.PRE_COOKIE, token, httponly=True, samesite="Strict",
                        secure=_secure(request), path="/login", max_age=3600)
    return response


async def login(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    user, password = str(form.get("username", "")), str(form.get("password", ""))
    role = console.credentials.check(user, password)
    if role is None:
        log.warning("failed log-in for user %r", user[:40])
        await asyncio.sleep(FAILED_LOGIN_DELAY)
        return await login_form(request, "wrong user name or password", status=401)
    sid, _ = console.sessions.create(role)
    log.info("log-in: %s", role)
    response = web.HTTPSeeOther("/")
    response.set_cookie(security.SESSION_COOKIE, sid, httponly=True, samesite="Strict",
                        secure=_secure(request), path="/")
    response.del_cookie(security.PRE_COOKIE, path="/login")
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    console_of(request).sessions.drop(request.cookies.get(security.SESSION_COOKIE))
    response = web.HTTPSeeOther("/login")
    response.del_cookie(security.SESSION_COOKIE, path="/")
    return response


def _secure(request: web.Request) -> bool:
    return request.secure or console_of(request).secure_cookies


# -- overview and fleet ------------------------------------------------------------------
async def overview(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    return page(request, "overview.html", o=console.sampler.overview(),
                interval_ms=int(console.sampler.interval * 1000))


async def overview_json(request: web.Request) -> web.StreamResponse:
    return web.json_response(console_of(request).sampler.overview())


async def fleet_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    latest = console.sampler.latest or {}
    status = latest.get("status") or {}
    return page(request, "fleet.html", consumers=status.get("consumers", []),
                fleet=latest.get("fleet"), o=console.sampler.overview())


# -- tickets -----------------------------------------------------------------------------
def ticket_path(console: Console, order_id: str) -> Path:
    """order-<id>.pdf directly inside the tickets directory (files.confined), where the id
    is digits only: nothing of the request's text reaches the path but those digits."""
    if not ORDER_ID.fullmatch(order_id):
        raise web.HTTPNotFound(text="no such ticket\n")
    name = f"order-{int(order_id)}.pdf"
    base = console.settings.tickets_dir
    try:
        return confined(base, Path(base) / name, name)
    except OutsideTicketsDir:  # pragma: no cover - cannot happen for a name of digits
        raise web.HTTPNotFound(text="no such ticket\n") from None


def read_ticket(path: Path) -> bytes:
    """The file's bytes; a symlink (O_NOFOLLOW), a non-regular or oversized file is
    refused: the tickets directory is trusted to hold files, not pointers elsewhere."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_PDF:
            raise FileNotFoundError(str(path))
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_PDF)
    finally:
        os.close(fd)


async def ticket(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    path = ticket_path(console, request.match_info["order_id"])
    try:
        body = await asyncio.to_thread(read_ticket, path)
    except OSError:
        raise web.HTTPNotFound(text="no such ticket\n") from None
    return web.Response(body=body, content_type="application/pdf", headers={
        "Content-Disposition": f'inline; filename="{path.name}"'})


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/login", login_form)
    r.add_post("/login", login)
    r.add_post("/logout", logout)
    r.add_get("/", overview)
    r.add_get("/api/overview", overview_json)
    r.add_get("/fleet", fleet_page)
    r.add_get("/ticket/{order_id}", ticket)
