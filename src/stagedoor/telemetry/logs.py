"""Log lines that join up: JSON for journald/collectors, plain text for a terminal.

A job's log lines carry the request id and trace the api put on the entry, so they
join the checkout that queued the job.  The worker runs each handler inside
`job_context(fields)`, and every line logged in it, through any logger (the handler's
own `logging.getLogger(__name__)`, `ctx.log`, a library's), carries those fields
without the handler passing them; lines from `ctx.to_thread` work too.  Anything
else goes in `extra=` and is kept:

    log.info("receipt sent", extra={"customer_tier": "gold", "bytes": 5120})

JSON line fields, in this order:

    ts          ISO-8601 UTC with ms, "2026-09-18T12:53:20.123Z"
    level       debug, info, warning, error, critical
    logger      the logger's name (stagedoor.worker, stagedoor.supervisor, yours)
    msg         the message, % arguments applied
    pid         the process id
    the job's   request_id, trace, entry_id, kind, order_id, outbox_id, deliveries,
    fields      consumer (job_context; an `extra` of the same name wins)
    trace_id,   the current OpenTelemetry span, when tracing is on (stagedoor[otel])
    span_id
    extras      every other `extra=` key, in the order given (EXTRA_KEYS first); a key
                that is a field above is written as "extra.<key>"
    exc, stack  the formatted traceback / stack when the record has them

Values that JSON cannot carry are written as str(); bytes are decoded (UTF-8, invalid
bytes escaped).  Every text that reaches the output goes through `redact`, so a Redis
URL with a password in it (in a message, an extra or a traceback) is written with the
password masked.

Format choice (`log_format`): "json"; "text"; "journal" = JSON with the syslog
priority prefix journald reads ("<3>{...}" for an error, so `journalctl -p warning`
filters); "auto" = journal when stderr is the journal (systemd sets JOURNAL_STREAM to
its device:inode), text on a terminal, JSON otherwise (pipes, files, containers).
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

import orjson

from ..config import Settings
from ..redaction import redact as _redact
from .tracing import current_ids

__all__ = ["CORE_KEYS", "EXTRA_KEYS", "FORMATS", "JOB_FIELDS", "JOB_KEYS",
           "JournalFormatter", "JsonFormatter", "TextFormatter", "current_job", "job_context",
           "journal_stream", "redact", "setup_logging"]

CORE_KEYS = ("ts", "level", "logger", "msg", "pid")
# The job's fields, which job_context puts on every line logged while a job runs.
JOB_KEYS = ("request_id", "trace", "entry_id", "kind", "order_id", "outbox_id",
            "deliveries", "consumer")
# The fields stagedoor itself passes as extras, written first when present.
EXTRA_KEYS = ("request_id", "trace", "entry_id", "kind", "order_id", "outbox_id", "consumer",
              "slot", "deliveries", "error")
FORMATS = ("auto", "json", "text", "journal")
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "warn": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}
# syslog priorities (sd-daemon(3) prefixes) by logging level
_PRIORITY = ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4),
             (logging.INFO, 6))

# What every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "taskName"}
_TAKEN = frozenset(CORE_KEYS) | {"trace_id", "span_id", "exc", "stack"}

_JOB: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "stagedoor_job", default=None)
# The same variable, for the worker's C dispatch (worker/_entries.pyx): it sets a job's
# fields once in the job's own copy of the context instead of entering job_context.
JOB_FIELDS = _JOB


class job_context:  # lower case: used as a function, `with job_context(fields):`
    """Every line logged inside (in this task, and in threads it hands a copy of its
    context to) carries these fields; see the module docstring.

    A class, not @contextlib.contextmanager: it is entered once per job, and a
    generator's set-up is a large share of a short job
    (docs/benchmarks.md, "Why the code is the way it is")."""

    __slots__ = ("_fields", "_token")

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._fields = fields

    def __enter__(self) -> None:
        self._token = _JOB.set(self._fields)

    def __exit__(self, *exc: object) -> None:
        _JOB.reset(self._token)


def current_job() -> Mapping[str, Any] | None:
    """The fields of the job being handled in this context, or None."""
    return _JOB.get()

# One redaction for every output: URL passwords (userinfo and query) and the secrets
# this process was given.  Re-exported here because the formatters are its main user.
redact = _redact


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
    """The job's fields, the span's ids, then every extra of the record (see above)."""
    out: dict[str, Any] = {}
    job = _JOB.get()
    if job:
        for k in JOB_KEYS:
            if k in job:
                out[k] = _clean(job[k])
    fields = record.__dict__
    for k in EXTRA_KEYS:
        if k in fields:
            out[k] = _clean(fields[k])
    ids = _span_ids()
    if ids is not None:
        out["trace_id"], out["span_id"] = ids
    for k, v in fields.items():
        if k in _STANDARD or k in out or k.startswith("_"):
            continue
        out[f"extra.{k}" if k in _TAKEN else k] = _clean(v)
    return out


def _span_ids() -> tuple[str, str] | None:
    if "opentelemetry.trace" not in sys.modules:  # tracing off: no import, no cost
        return None

    return current_ids()


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


class JournalFormatter(JsonFormatter):
    """A JSON line behind the syslog priority journald reads: "<4>{...}" for a warning."""

    def format(self, record: logging.LogRecord) -> str:
        return f"<{priority(record.levelno)}>{super().format(record)}"


def priority(levelno: int) -> int:
    """The syslog priority of a logging level (7 debug ... 2 critical)."""
    for threshold, prio in _PRIORITY:
        if levelno >= threshold:
            return prio
    return 7


def journal_stream(stream: Any, environ: Mapping[str, str] | None = None) -> bool:
    """True when `stream` is the journal: JOURNAL_STREAM names its device:inode."""
    value = (os.environ if environ is None else environ).get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    if not dev.isdigit() or not ino.isdigit():
        return False
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


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
    "auto", "json", "text", "journal".  level: "debug", "info", "warning" or "error"; overrides
    the settings' level; default "info".  stream: default sys.stderr (looked up at
    call time, so a test's capsys works).  Calling it again replaces the handler it
    installed before; other handlers are left alone.
    """
    if isinstance(settings_or_format, Settings):
        fmt = settings_or_format.log_format
        level = level or settings_or_format.log_level
    else:
        fmt = settings_or_format
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: expected auto, json, text or journal")
    name = (level or "info").lower()
    if name not in LEVELS:
        raise ValueError(f"log level {level!r}: expected debug, info, warning or error")
    out = stream if stream is not None else sys.stderr
    if fmt == "auto":
        fmt = "journal" if journal_stream(out) else "text" if _is_tty(out) else "json"
    handler = _Handler(out)
    formatter = {"text": TextFormatter, "journal": JournalFormatter}.get(fmt, JsonFormatter)
    handler.setFormatter(formatter())
    target = logger if logger is not None else logging.getLogger()
    for old in list(target.handlers):
        if isinstance(old, _Handler):
            target.removeHandler(old)
    target.addHandler(handler)
    target.setLevel(LEVELS[name])
    return handler

