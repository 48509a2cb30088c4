"""The console's state, one per process (app["console"]): what every request handler
and middleware reaches through console_of(request)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import jinja2
import markupsafe
from aiohttp import web

from ..config import Settings
from ..console.text import human_ms, safe, seconds_text
from . import security
from .admission import Gate
from .credentials import PasswordFiles
from .sampler import Sampler, human_bytes
from .throttle import Throttle


@dataclass
class Console:
    """Everything a request handler needs, one per process (app["console"])."""

    settings: Settings
    credentials: PasswordFiles
    client: Any  # the asyncio Redis client the console functions are handed
    sampler: Sampler
    secure_cookies: bool = False
    public_origin: str | None = None
    # the Host names served (security.py, "Hosts"): loopback, --allowed-host, and the
    # name of --public-origin
    allowed_hosts: frozenset[str] = security.LOOPBACK_HOSTS
    sessions: security.Sessions = field(default_factory=security.Sessions)
    login_tokens: security.LoginTokens = field(default_factory=security.LoginTokens)
    throttle: Throttle = field(default_factory=Throttle)
    gate: Gate = field(default_factory=Gate)  # requests at Redis at once (admission.py)
    templates: jinja2.Environment = field(default_factory=lambda: templates())


def shown(value: Any) -> Any:
    """Every value a template prints (Jinja2's finalize), before autoescape: text with
    its control and format characters escaped as the CLI escapes them (console/text.safe),
    so a direction override stored in an order id (4471\\u202e0988) cannot reorder
    what the operator reads (44718890).  Newlines and tabs stay: HTML shows them as
    space.  Markup (the templates' own HTML) is the templates', not Redis's."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return safe(value, keep="\n\t")
    return value


def utc(value: Any) -> str:
    """Epoch seconds as a UTC time; anything else (or a time no date shows) is "-"."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))
    except (OverflowError, OSError, ValueError):
        return "-"


def templates() -> jinja2.Environment:
    """Jinja2 with autoescape on for every template (all are HTML), every printed value
    through `shown`, undefined names an error rather than an empty string."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("stagedoor.web", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, finalize=shown)
    env.filters["ms"] = lambda v: human_ms(v) if isinstance(v, int | float) else "-"
    env.filters["bytes"] = lambda v: human_bytes(v) if isinstance(v, int) else "-"
    env.filters["utc"] = utc
    env.filters["secs"] = lambda v: seconds_text(v) if isinstance(v, int | float) else "-"
    return env


def console_of(request: web.Request) -> Console:
    c: Console = request.app["console"]
    return c
