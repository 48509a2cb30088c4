"""The audit log: every operator action, from the console or the CLI, recorded twice.

An action (pause, resume, replay, delete, purge, ticket download, and for one stuck
pending entry dead-letter and release) is one structured
log line (logger `stagedoor.audit`, the fields as extras: one JSON object with
--log-format json) and one entry of the audit stream in Redis (stream/keys.audit_key,
on the queue's hash tag; XADD MAXLEN ~ audit_maxlen, so it is capped by count and the
oldest go first).  The entry says who (the console's role and the client's address,
or the CLI's user@host), when (the entry id's milliseconds and `at`), through what
(`via`: web or cli), what (`action`), how many things it touched (`count`) and which
(`detail`, shortened).  The console shows the newest on its audit page.

The console and the workers have logging set up; a CLI command has not, so the first
record of its process installs the project's handler on the audit logger (telemetry/logs.py:
--log-format's auto is the journal under systemd, text on a terminal, JSON otherwise;
on stderr, which keeps stdout the command's output).

The line is written first: if Redis refuses the entry (away, or an ACL without XADD
on the key: docs/security.md), the line is still there and the caller sees the error.
"""

from __future__ import annotations

import getpass
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any

from ..config import Settings
from ..stream.keys import audit_key
from ..telemetry.logs import setup_logging

log = logging.getLogger("stagedoor.audit")
DETAIL_MAX = 300
FIELDS = ("at", "who", "via", "action", "count", "detail")


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    at: float        # seconds since the epoch
    who: str
    via: str
    action: str
    count: int
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "at": self.at, "who": self.who, "via": self.via,
                "action": self.action, "count": self.count, "detail": self.detail}


def cli_user() -> str:
    """Who runs a CLI command: user@host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"{user}@{socket.gethostname()}"


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= DETAIL_MAX else text[:DETAIL_MAX - 3] + "..."


async def record(client: Any, settings: Settings, *, who: str, via: str, action: str,
                 count: int, detail: str = "") -> str:
    """Log the action and append it to the audit stream; the entry's id."""
    if not log.hasHandlers():  # a CLI command: nothing set up logging

        setup_logging(settings, logger=log)
    now = time.time()
    fields = {"at": f"{now:.3f}", "who": _short(who), "via": via, "action": action,
              "count": str(int(count)), "detail": _short(detail)}
    log.info("audit: %s %s by %s via %s%s", action, count, fields["who"], via,
             f" ({fields['detail']})" if fields["detail"] else "",
             extra={"audit_action": action, "audit_count": int(count),
                    "audit_who": fields["who"], "audit_via": via,
                    "audit_detail": fields["detail"]})
    entry_id = await client.xadd(audit_key(settings), fields, maxlen=settings.audit_maxlen,
                                 approximate=True)
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


async def newest(client: Any, settings: Settings, limit: int = 200) -> list[Entry]:
    """The newest `limit` entries, newest first."""
    rows = await client.xrevrange(audit_key(settings), count=limit)
    out = []
    for entry_id, raw in rows:
        # the console's client parses nothing (console/client.py): a flat list
        pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
        f = {_text(k): _text(v) for k, v in pairs}
        try:
            at = float(f.get("at", ""))
        except ValueError:
            at = int(_text(entry_id).split("-")[0]) / 1000
        try:
            count = int(f.get("count", "0"))
        except ValueError:
            count = 0
        out.append(Entry(_text(entry_id), at, f.get("who", "?"), f.get("via", "?"),
                         f.get("action", "?"), count, f.get("detail", "")))
    return out
