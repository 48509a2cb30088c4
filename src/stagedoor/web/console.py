"""The console's state, one per process (app["console"]): what every request handler
and middleware reaches through console_of(request)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import jinja2
from aiohttp import web

from ..cli.commands.status import human_ms
from ..config import Settings
from . import security
from .credentials import PasswordFiles
from .sampler import Sampler, human_bytes
from .throttle import Throttle


@dataclass
class Console:
    """Everything a request handler needs, one per process (app["console"])."""

    settings: Settings
    credentials: PasswordFiles
    client: Any  # the asyncio Redis client the ops functions are handed
    sampler: Sampler
    secure_cookies: bool = False
    public_origin: str | None = None
    # the Host names served (security.py, "Hosts"): loopback, --allowed-host, and the
    # name of --public-origin
    allowed_hosts: frozenset[str] = security.LOOPBACK_HOSTS
    sessions: security.Sessions = field(default_factory=security.Sessions)
    login_tokens: security.LoginTokens = field(default_factory=security.LoginTokens)
    throttle: Throttle = field(default_factory=Throttle)
    templates: jinja2.Environment = field(default_factory=lambda: templates())


def templates() -> jinja2.Environment:
    """Jinja2 with autoescape on for every template (all are HTML), undefined names an
    error rather than an empty string."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("stagedoor.web", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["ms"] = lambda v: human_ms(v) if isinstance(v, int | float) else "-"
    env.filters["bytes"] = lambda v: human_bytes(v) if isinstance(v, int) else "-"
    env.filters["utc"] = lambda v: (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(v))
                                    if isinstance(v, int | float) else "-")
    return env


def console_of(request: web.Request) -> Console:
    c: Console = request.app["console"]
    return c
