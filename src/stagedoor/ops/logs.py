"""Log lines that join up: JSON for journald/collectors, plain text for a terminal.

A job's log lines carry the request id and trace the api put on the entry, so they
join the checkout that queued the job.  Pass them as `extra=`:

    log.info("rendered", extra={"entry_id": eid, "kind": job.kind,
                                "order_id": job.order_id, "request_id": job.request_id,
                                "trace": job.trace, "slot": 3})

JSON line fields: ts (ISO-8601 UTC with ms, "2026-09-18T12:53:20.123Z"), level,
logger, msg, pid, then whichever of EXTRA_KEYS were given, then `exc` (the formatted
traceback) when the record has exc_info.  Every text that reaches the output goes
through `redact`, so a Redis URL with a password in it (in a message, an extra or a
traceback) is written with the password masked.

Format choice (`log_format`): "json", "text", or "auto" = text when the stream is a
terminal, JSON otherwise (systemd, pipes, files).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

import orjson

from ..config import Settings

__all__ = ["EXTRA_KEYS", "JsonFormatter", "TextFormatter", "redact", "setup_logging"]

EXTRA_KEYS = ("request_id", "trace", "entry_id", "kind", "order_id", "outbox_id", "consumer",
              "slot", "deliveries", "error")
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "warn": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}

# scheme://user:password@  -> scheme://user:***@   (user may be empty: redis://:pw@host)
# The password part is greedy up to the last @ of the authority, so an unencoded @ in
# a password does not leak its tail.
_URL_USERINFO = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@]*):(?P<pw>[^\s/?#]*)@")


def redact(text: str) -> str:
    """Mask the password of every URL in text: redis://u:secret@h -> redis://u:***@h."""
    if "://" not in text:
        return text
    return _URL_USERINFO.sub(lambda m: f"{m['head']}:***@", text)


def _iso(created: float) -> str:
    seconds = int(created)
    ms = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def _clean(value: Any) -> Any:
    """An extra's value as something JSON can carry, with any URL password masked."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bool | int | float) or value is None:
        return value
    return redact(str(value))


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    fields = record.__dict__
    return {k: _clean(fields[k]) for k in EXTRA_KEYS if k in fields}


class JsonFormatter(logging.Formatter):
    """One JSON object per line (orjson), fields as in the module docstring."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact(record.getMessage()),
            "pid": record.process if record.process is not None else os.getpid(),
        }
        doc.update(_extras(record))
        if record.exc_info:
            doc["exc"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            doc["exc"] = redact(record.exc_text)
        if record.stack_info:
            doc["stack"] = redact(self.formatStack(record.stack_info))
        return orjson.dumps(doc, default=str).decode()


class TextFormatter(logging.Formatter):
    """`<ts> <LEVEL> <logger>[<pid>]: <msg> key=value ...` for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        line = (f"{_iso(record.created)} {record.levelname:<7} {record.name}[{record.process}]: "
                f"{redact(record.getMessage())}")
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            line += "\n" + redact(self.formatException(record.exc_info))
        if record.stack_info:
            line += "\n" + redact(self.formatStack(record.stack_info))
        return line


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler setup_logging installed, so a second call replaces it."""


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def setup_logging(settings_or_format: Settings | str = "auto", level: str | None = None,
                  stream: IO[str] | None = None, *,
                  logger: logging.Logger | None = None) -> logging.Handler:
    """Install one handler on the root logger (or `logger`) and return it.

    settings_or_format: a Settings (its log_format and log_level are used) or one of
    "auto", "json", "text".  level: "debug", "info", "warning" or "error"; overrides
    the settings' level; default "info".  stream: default sys.stderr (looked up at
    call time, so a test's capsys works).  Calling it again replaces the handler it
    installed before; other handlers are left alone.
    """
    if isinstance(settings_or_format, Settings):
        fmt = settings_or_format.log_format
        level = level or settings_or_format.log_level
    else:
        fmt = settings_or_format
    if fmt not in ("auto", "json", "text"):
        raise ValueError(f"log format {fmt!r}: expected auto, json or text")
    name = (level or "info").lower()
    if name not in LEVELS:
        raise ValueError(f"log level {level!r}: expected debug, info, warning or error")
    out = stream if stream is not None else sys.stderr
    if fmt == "auto":
        fmt = "text" if _is_tty(out) else "json"
    handler = _Handler(out)
    handler.setFormatter(TextFormatter() if fmt == "text" else JsonFormatter())
    target = logger if logger is not None else logging.getLogger()
    for old in list(target.handlers):
        if isinstance(old, _Handler):
            target.removeHandler(old)
    target.addHandler(handler)
    target.setLevel(LEVELS[name])
    return handler


def log_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The EXTRA_KEYS of a mapping (a parsed job's fields, say), for `extra=`."""
    return {k: fields[k] for k in EXTRA_KEYS if k in fields}
