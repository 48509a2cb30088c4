"""The pages and the actions.  Queries and actions are console/ functions (the CLI's too);
this module only reads forms, calls them and renders templates.

Every value shown comes from Redis (the stream, a dead letter, an order) and is hostile:
templates print it with Jinja2's autoescape, the script sets it with textContent, and
nothing from Redis ever lands in a URL path, an attribute without quotes, a script or
a style.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from ..console import audit, deadletters, fleet, jobs, pending, release
from ..console.deadletters import BadBound, DeadFilter
from ..telemetry import kindstats
from ..telemetry.inspect import BadEntryId, check_id, parse_id
from ..tickets.files import OutsideTicketsDir, confined
from . import kindchart, security
from .console import Console, console_of
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


def who(request: web.Request) -> str:
    """The audit's `who` for this request: the role and the client's address."""
    session = request.get("session")
    return f"{session.role if session else '?'}@{request.remote or '?'}"


async def record(request: web.Request, action: str, count: int, detail: str = "") -> None:
    """One audit entry for an action of this request (console/audit.py)."""
    console = console_of(request)
    await audit.record(console.client, console.settings, who=who(request), via="web",
                       action=action, count=count, detail=detail)


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
    # one token per browser while it logs in: a second log-in page (another tab, a
    # redirect) must not invalidate the form of the first; only a token this console
    # issued is kept (security.LoginTokens), one the client made up is replaced
    token = request.cookies.get(security.PRE_COOKIE) or ""
    if not console.login_tokens.valid(token):
        token = console.login_tokens.issue()
    response = page(request, "login.html", status=status, login_csrf=token, error=error)
    response.set_cookie(security.PRE_COOKIE, token, httponly=True, samesite="Strict",
                        secure=_secure(request), path="/login", max_age=3600)
    return response


async def login(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    user, password = str(form.get("username", "")), str(form.get("password", ""))
    source = request.remote or "?"
    wait = console.throttle.acquire(source)  # web/throttle.py: per source and in all
    if wait > 0:
        if refused := console.throttle.refused(source):
            log.warning("log-in throttled for %s (user %r): %d refused since the last line",
                        source, user[:40], refused)
        response = await login_form(request, "too many log-in attempts: try again in "
                                    f"{math.ceil(wait)} s", status=429)
        response.headers["Retry-After"] = str(math.ceil(wait))
        return response
    role = console.credentials.current().check(user, password)
    if role is None:
        log.warning("failed log-in for user %r from %s", user[:40], source)
        await asyncio.sleep(FAILED_LOGIN_DELAY)
        return await login_form(request, "wrong user name or password", status=401)
    console.throttle.refund(source)
    sid, _ = console.sessions.create(role, console.credentials.stamp(role))
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
    o = console.sampler.overview()
    return page(request, "overview.html", o=o, paused_now=(o.get("values") or {}).get("paused"),
                interval_ms=int(console.sampler.interval * 1000))


async def overview_json(request: web.Request) -> web.StreamResponse:
    return web.json_response(console_of(request).sampler.overview())


async def fleet_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    found = await fleet.fleet(console.client, console.settings)
    return page(request, "fleet.html", fleet=found, paused_now=found.paused.paused)


@operator_only
async def pause_action(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    reason = str(form.get("reason", ""))[:200]
    state = await fleet.pause(console.client, console.settings, by=who(request),
                              reason=reason)
    await record(request, "pause", 1, reason)
    await console.sampler.refresh()
    if state.kept_earlier:  # SET NX: the first pause stands; say so, and whose it is
        tell(request, "error", f"the fleet was already paused by {state.by or '?'}: "
             f"{state.reason or '(no reason given)'}; that pause is kept, and your reason "
             "is not (resume, then pause again to change it)")
    else:
        tell(request, "ok", "fleet paused: workers finish what they hold and read nothing "
             "new" if state.paused else "pause flag not set")
    raise web.HTTPSeeOther(_back(form, "/fleet"))


@operator_only
async def resume_action(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    before = await fleet.resume(console.client, console.settings)
    await record(request, "resume", 1 if before.paused else 0)
    await console.sampler.refresh()
    tell(request, "ok", "fleet resumed" if before.paused else "the fleet was not paused")
    raise web.HTTPSeeOther(_back(form, "/fleet"))


def _back(form: Any, default: str) -> str:
    """Where an action returns: one of our own pages (a path we know), never a URL
    from the form as given."""
    back = str(form.get("back", ""))
    return back if back in ("/", "/fleet", "/dead", "/pending", "/job") else default


# -- pending -----------------------------------------------------------------------------
def _int_arg(query: Any, name: str, scale: int = 1) -> int:
    raw = str(query.get(name, "") or "").strip()
    if not raw:
        return 0
    try:
        value = float(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name}: not a number\n") from None
    if not 0 <= value < 1e12:
        raise web.HTTPBadRequest(text=f"{name}: out of range\n")
    return int(value * scale)


def _opt(query: Any, name: str) -> str | None:
    value = str(query.get(name, "") or "").strip()
    return value[:200] or None


async def pending_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    q = request.query
    found = await pending.list_pending(
        console.client, console.settings, kind=_opt(q, "kind"), consumer=_opt(q, "consumer"),
        min_idle_ms=_int_arg(q, "min_idle", 1000), min_deliveries=_int_arg(q, "min_deliveries"),
        limit=100)
    return page(request, "pending.html", found=found, q={k: q.get(k, "") for k in (
        "kind", "consumer", "min_idle", "min_deliveries")})


@operator_only
async def pending_dead_letter(request: web.Request) -> web.StreamResponse:
    """A stuck pending entry to the dead letters, in two steps: the first POST shows the
    entry (consumer, idle, deliveries, last error, and whether a worker may be running
    it now); the second, with confirm, moves it (console.pending.dead_letter)."""
    console = console_of(request)
    form = await request.post()
    entry_id = _entry_id(str(form.get("id", "")))
    if not form.get("confirm"):
        p = await release.plan(console.client, console.settings, entry_id)
        if p is None:
            tell(request, "error", f"{entry_id} is not pending any more (acked or "
                                   "dead-lettered meanwhile)")
            raise web.HTTPSeeOther("/pending")
        return page(request, "pending_confirm.html", e=p.entry, owner=p.owner,
                    running=p.entry.idle_ms < console.settings.claim_idle_ms)
    dead_id = await pending.dead_letter(console.client, console.settings, entry_id,
                                        who=who(request))
    if dead_id is None:
        tell(request, "error", f"{entry_id} is not pending any more: nothing dead-lettered")
    else:
        await record(request, "dead-letter", 1, f"{entry_id} {dead_id}")
        tell(request, "ok", f"dead-lettered {entry_id} as {dead_id}: replay or delete it "
                            "from the dead letters")
    raise web.HTTPSeeOther("/pending")


NOT_PENDING = ("{} is not pending any more (acked, dead-lettered, or never delivered): "
               "nothing to release\n")


async def pending_entry_page(request: web.Request) -> web.StreamResponse:
    """One pending entry with its owner's presence, and (operator) its two actions."""
    console = console_of(request)
    entry_id = _entry_id(request.match_info["entry_id"])
    p = await release.plan(console.client, console.settings, entry_id)
    if p is None:
        raise web.HTTPNotFound(text=NOT_PENDING.format(entry_id).replace(
            ": nothing to release", ""))
    return page(request, "pending_entry.html", e=p.entry, owner=p.owner, p=p)


@operator_only
async def pending_release(request: web.Request) -> web.StreamResponse:
    """Release a stuck pending entry to the fleet now (console/release.py), in two steps: the
    first POST shows what will happen (the entry, its owner and whether that worker may
    be running it); the second, with confirm, does it if the entry is still pending on
    the owner shown.  Not pending any more: 409; taken by another consumer meanwhile:
    409, look again."""
    console = console_of(request)
    form = await request.post()
    entry_id = _entry_id(str(form.get("id", "")))
    owner = str(form.get("owner", ""))[:200] or None
    if not form.get("confirm"):
        p = await release.plan(console.client, console.settings, entry_id)
        if p is None:
            raise web.HTTPConflict(text=NOT_PENDING.format(entry_id))
        return page(request, "pending_release_confirm.html", e=p.entry, owner=p.owner, p=p)
    done = await release.release(console.client, console.settings, entry_id, owner=owner)
    if done.status == "not-pending":
        raise web.HTTPConflict(text=NOT_PENDING.format(entry_id))
    if done.status == "moved":
        raise web.HTTPConflict(text=f"{entry_id} is pending on {done.consumer} now, not on "
                                    f"{owner}: a worker took it meanwhile; nothing released "
                                    "(look at it again)\n")
    await record(request, "release", 1, f"{entry_id} from {done.consumer}")
    tell(request, "ok", f"released {entry_id} (pending on {done.consumer}) to the fleet: "
                        "the next reclaim pass of a worker takes it")
    raise web.HTTPSeeOther("/pending")


# -- dead letters ------------------------------------------------------------------------
FILTER_FIELDS = ("kind", "error", "since", "until")


def dead_filter(source: Any) -> tuple[DeadFilter, dict[str, str]]:
    """The filter of a query string or form, and its fields as given (for the links
    and hidden fields that carry it on); a bad time is a 400 with one line."""
    given = {k: str(source.get(k, "") or "").strip()[:200] for k in FILTER_FIELDS}
    try:
        flt = DeadFilter(kind=given["kind"] or None, error=given["error"] or None,
                         since=deadletters.parse_bound(given["since"]) if given["since"] else None,
                         until=deadletters.parse_bound(given["until"], end=True)
                         if given["until"] else None)
    except BadBound as e:
        raise web.HTTPBadRequest(text=f"{e}\n") from None
    return flt, given


async def dead_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    flt, given = dead_filter(request.query)
    before = _opt(request.query, "before")
    if before is not None:
        before = _entry_id(before, "before")
    found = await deadletters.list_dead(console.client, console.settings, flt, limit=50,
                                        before=before)
    return page(request, "dead.html", found=found, q=given, before=before,
                carry_q=_carry(request.query))


def _entry_id(text: str, name: str = "entry id") -> str:
    """An entry id from a form, a query or a path; malformed or out of range (past the
    year 9999: inspect.check_id) is a 400 with one line."""
    try:
        return check_id(text)
    except BadEntryId as e:
        raise web.HTTPBadRequest(text=f"{name}: {e}\n") from None


async def dead_entry_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    entry = await deadletters.show_dead(console.client, console.settings,
                                        _entry_id(request.match_info["entry_id"]))
    if entry is None:
        raise web.HTTPNotFound(text="no such dead letter (replayed, deleted or trimmed)\n")
    return page(request, "dead_entry.html", entry=entry)


def _outcomes(what: str, outcomes: list[Any]) -> str:
    done = [o.id for o in outcomes if o.status == "ok"]
    other = [f"{o.id} {o.status}" for o in outcomes if o.status not in ("ok", "full")]
    text = f"{what} {len(done)}"
    if done:
        text += ": " + ", ".join(done[:10]) + (" ..." if len(done) > 10 else "")
    if other:
        text += "; not touched: " + ", ".join(other[:10])
    return text


def tell_replayed(request: web.Request, result: deadletters.Replayed) -> None:
    """How many went back, and, stopped at the refusal level, how many did not and why."""
    console = console_of(request)
    tell(request, "ok", _outcomes("replayed", result.outcomes))
    if result.stopped:
        tell(request, "error", f"{result.stopped} of {len(result.outcomes)} not replayed, "
                               f"left as dead letters: {result.room.why(console.settings)}; "
                               "replay them when the workers caught up")


@operator_only
async def dead_replay(request: web.Request) -> web.StreamResponse:
    """Replay the entries checked (or the one button's id)."""
    console = console_of(request)
    form = await request.post()
    ids = [_entry_id(str(v)) for v in form.getall("id", [])][:500]
    if not ids:
        tell(request, "error", "nothing selected")
    else:
        result = await deadletters.replay(console.client, console.settings, ids)
        await record_outcomes(request, "replay", result.outcomes)
        tell_replayed(request, result)
    raise web.HTTPSeeOther("/dead?" + _carry(form))


async def dead_errors_page(request: web.Request) -> web.StreamResponse:
    """The dead letters counted by error, with the first and last seen of each."""
    console = console_of(request)
    found = await deadletters.by_error(console.client, console.settings)
    return page(request, "dead_errors.html", found=found)


CONFIRM_SHOWN = 20  # dead letters a confirm page describes one by one


@operator_only
async def dead_delete(request: web.Request) -> web.StreamResponse:
    """Delete the entries given, in two steps: the first POST shows each (its kind, order,
    error and time) with the one button that deletes them; the second, with confirm,
    deletes.  A one-click Delete on the list removed a dead letter for good."""
    console = console_of(request)
    form = await request.post()
    ids = [_entry_id(str(v)) for v in form.getall("id", [])][:500]
    if not form.get("confirm"):
        if not ids:
            tell(request, "error", "nothing selected")
            raise web.HTTPSeeOther("/dead?" + _carry(form))
        shown = await deadletters.show_many(console.client, console.settings,
                                            ids[:CONFIRM_SHOWN])
        return page(request, "dead_delete_confirm.html", ids=ids,
                    shown=list(zip(ids, shown, strict=False)), q=dead_filter(form)[1],
                    carry=_carry(form))
    outcomes = await deadletters.delete(console.client, console.settings, ids)
    await record_outcomes(request, "delete", outcomes)
    tell(request, "ok", _outcomes("deleted", outcomes))
    raise web.HTTPSeeOther("/dead?" + _carry(form))


async def record_outcomes(request: web.Request, action: str, outcomes: list[Any]) -> None:
    """The audit entry of a replay or delete: how many were done, and their ids."""
    done = [o.id for o in outcomes if o.status == "ok"]
    await record(request, action, len(done), " ".join(done))


def _filter_text(given: dict[str, str], upto: str) -> str:
    return " ".join([*(f"{k}={v}" for k, v in given.items() if v), f"upto={upto}"])


def _carry(source: Any) -> str:
    """The filter, as a query string for the page to return to (urlencoded)."""
    return urlencode({k: str(source.get(k, "")) for k in FILTER_FIELDS if source.get(k)})


@operator_only
async def dead_bulk(request: web.Request) -> web.StreamResponse:
    """Replay or purge every entry the filter selects, in two steps: the first POST
    shows what would be touched (the dry run: the count, the range); the second, with
    confirm and the newest id shown, acts on entries up to that id only, so an entry
    dead-lettered meanwhile is not touched."""
    console = console_of(request)
    form = await request.post()
    action = str(form.get("action", ""))
    if action not in ("replay", "purge"):
        raise web.HTTPBadRequest(text="action: replay or purge\n")
    flt, given = dead_filter(form)
    upto = str(form.get("upto", ""))
    if not form.get("confirm"):
        selection = await deadletters.select(console.client, console.settings, flt)
        # Replay stops at the backlog refusal level: say so before, with how many fit now.
        room = (await deadletters.room(console.client, console.settings,
                                       len(selection.ids)) if action == "replay" else None)
        shown = await deadletters.show_many(console.client, console.settings,
                                            selection.ids[:CONFIRM_SHOWN])
        return page(request, "dead_confirm.html", action=action, selection=selection,
                    room=room, q=given, carry=_carry(form),
                    shown=list(zip(selection.ids, shown, strict=False)))
    upto = _entry_id(upto)
    if flt.until is None or parse_id(upto) < parse_id(flt.until):
        flt.until = upto
    if action == "replay":
        selection = await deadletters.select(console.client, console.settings, flt)
        result = await deadletters.replay(console.client, console.settings, selection.ids)
        await record_outcomes(request, "replay", result.outcomes)
        tell_replayed(request, result)
    else:
        removed = await deadletters.purge(console.client, console.settings, flt, upto=upto)
        await record(request, "purge", removed, _filter_text(given, upto))
        tell(request, "ok", f"purged {removed} dead letters")
    await console.sampler.refresh()
    raise web.HTTPSeeOther("/dead?" + _carry(form))


# -- job lookup --------------------------------------------------------------------------
async def job_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    q = request.query
    # 41 characters hold any entry id; a longer value is refused below, never cut short
    given = {k: str(q.get(k, "") or "").strip()[:60] for k in ("order_id", "outbox_id",
                                                                 "entry_id")}
    asked = {k: v for k, v in given.items() if v}
    story = None
    error = None
    if asked:
        try:
            if len(asked) != 1:
                raise jobs.LookupError_("give one of an order id, an outbox id or an entry id")
            [(name, value)] = asked.items()
            if name == "entry_id":
                try:
                    entry_id = check_id(value)
                except BadEntryId as e:
                    raise jobs.LookupError_(str(e)) from None
                story = await jobs.lookup(console.client, console.settings,
                                          entry_id=entry_id)
            elif ORDER_ID.fullmatch(value) and name == "order_id":
                story = await jobs.lookup(console.client, console.settings,
                                          order_id=int(value))
            elif ORDER_ID.fullmatch(value):
                story = await jobs.lookup(console.client, console.settings,
                                          outbox_id=int(value))
            else:
                raise jobs.LookupError_(f"{name.replace('_', ' ')}: digits only")
        except jobs.LookupError_ as e:
            error = str(e)
    return page(request, "job.html", story=story, q=given, error=error,
                status=400 if error else 200)


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


@operator_only
async def ticket(request: web.Request) -> web.StreamResponse:
    """A buyer's ticket: its QR codes admit whoever holds them, so only the operator
    downloads one, and each download is in the audit log (recorded before it is
    served: a download the audit cannot record is refused, 503)."""
    console = console_of(request)
    path = ticket_path(console, request.match_info["order_id"])
    try:
        body = await asyncio.to_thread(read_ticket, path)
    except OSError:
        raise web.HTTPNotFound(text="no such ticket\n") from None
    await record(request, "ticket download", 1, path.name)
    return web.Response(body=body, content_type="application/pdf", headers={
        "Content-Disposition": f'inline; filename="{path.name}"'})


# -- the audit log ---------------------------------------------------------------------
async def audit_page(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    entries = await audit.newest(console.client, console.settings, limit=200)
    return page(request, "audit.html", entries=entries)


# -- metrics by kind ----------------------------------------------------------------------
async def kinds_page(request: web.Request) -> web.StreamResponse:
    """The last hour by kind (telemetry/kindstats.py): one round trip, read by any role."""
    console = console_of(request)
    w = await kindstats.window(console.client, console.settings)
    return page(request, "kinds.html", w=w, charts=kindchart.charts(w))


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/login", login_form)
    r.add_post("/login", login)
    r.add_post("/logout", logout)
    r.add_get("/", overview)
    r.add_get("/api/overview", overview_json)
    r.add_get("/fleet", fleet_page)
    r.add_post("/pause", pause_action)
    r.add_post("/resume", resume_action)
    r.add_get("/pending", pending_page)
    r.add_post("/pending/dead-letter", pending_dead_letter)
    r.add_post("/pending/release", pending_release)
    r.add_get("/pending/{entry_id}", pending_entry_page)
    r.add_get("/dead", dead_page)
    r.add_get("/dead/errors", dead_errors_page)  # before /dead/{entry_id}: not an id
    r.add_get("/dead/{entry_id}", dead_entry_page)
    r.add_post("/dead/replay", dead_replay)
    r.add_post("/dead/delete", dead_delete)
    r.add_post("/dead/bulk", dead_bulk)
    r.add_get("/job", job_page)
    r.add_get("/ticket/{order_id}", ticket)
    r.add_get("/audit", audit_page)
    r.add_get("/kinds", kinds_page)  # not /metrics: the supervisor's exporter has that
