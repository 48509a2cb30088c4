"""stagedoor.telemetry.logs: JSON lines, text on a terminal, job extras, passwords redacted."""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from stagedoor.config import Settings
from stagedoor.telemetry.logs import (
    CORE_KEYS,
    EXTRA_KEYS,
    JOB_KEYS,
    JournalFormatter,
    JsonFormatter,
    TextFormatter,
    job_context,
    journal_stream,
    redact,
    setup_logging,
)

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("stagedoor.test_logs")
    log.propagate = False
    yield log
    for handler in list(log.handlers):
        if isinstance(handler.formatter, JsonFormatter | TextFormatter):
            log.removeHandler(handler)
    log.propagate = True
    log.setLevel(logging.NOTSET)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.parametrize(("text", "expected"), [
    ("redis://user:secret@host:6379/0", "redis://user:***@host:6379/0"),
    ("rediss://:secret@host", "rediss://:***@host"),
    ("unix://:pw@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
    ("connect redis://u:p%40ss@h:1/0 failed; retry redis://a:b@c",
     "connect redis://u:***@h:1/0 failed; retry redis://a:***@c"),
    ("redis://u:pa@ss@host/0", "redis://u:***@host/0"),  # an unencoded @ does not leak
    ("redis://host:6379/0", "redis://host:6379/0"),
    ("redis://user@host", "redis://user@host"),
    ("no url here: a:b@c", "no url here: a:b@c"),
])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_json_lines(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", "debug", out, logger=logger)
    logger.debug("rendered %s", "order 4471", extra={
        "request_id": "7f3a9c2e", "trace": "4bf92f35", "entry_id": "1758200000000-0",
        "kind": "render_tickets", "order_id": 4471, "outbox_id": 88210,
        "consumer": "host-01", "slot": 1, "deliveries": 2, "error": None,
        "customer_tier": "gold"})
    [doc] = lines(out)
    assert TS.match(str(doc["ts"]))
    assert doc["level"] == "debug"
    assert doc["logger"] == "stagedoor.test_logs"
    assert doc["msg"] == "rendered order 4471"
    assert doc["pid"] == os.getpid()
    assert doc["order_id"] == 4471 and doc["slot"] == 1 and doc["deliveries"] == 2
    assert doc["request_id"] == "7f3a9c2e" and doc["trace"] == "4bf92f35"
    assert doc["entry_id"] == "1758200000000-0" and doc["kind"] == "render_tickets"
    assert doc["outbox_id"] == 88210 and doc["consumer"] == "host-01"
    assert doc["error"] is None
    assert doc["customer_tier"] == "gold"  # a handler's own extra is kept
    assert list(doc)[:5] == ["ts", "level", "logger", "msg", "pid"]
    assert set(doc) - {"ts", "level", "logger", "msg", "pid"} == {*EXTRA_KEYS, "customer_tier"}


def test_exceptions_and_passwords(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", "info", out, logger=logger)
    try:
        raise ConnectionError("cannot reach redis://ops:hunter2@10.0.0.5:6379/0")
    except ConnectionError as e:
        logger.exception("lost %s", "redis://:hunter2@h", extra={"error": e,
                                                                  "trace": b"raw-bytes"})
    logger.info("below %s", "info", extra={"kind": object()})
    first, second = lines(out)
    assert first["level"] == "error"
    assert first["msg"] == "lost redis://:***@h"
    assert first["error"] == "cannot reach redis://ops:***@10.0.0.5:6379/0"
    assert first["trace"] == "raw-bytes"
    exc = str(first["exc"])
    assert exc.startswith("Traceback") and "ConnectionError" in exc
    assert "hunter2" not in out.getvalue()
    assert str(second["kind"]).startswith("<object object")


def test_level_filters(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", "warning", out, logger=logger)
    logger.info("quiet")
    logger.warning("loud")
    assert [d["msg"] for d in lines(out)] == ["loud"]


def test_auto_is_text_on_a_terminal_and_json_otherwise(logger: logging.Logger) -> None:
    tty = Tty()
    handler = setup_logging("auto", "info", tty, logger=logger)
    assert isinstance(handler.formatter, TextFormatter)
    logger.info("hello %s", "redis://u:pw@h", extra={"order_id": 7, "slot": 0})
    line = tty.getvalue().rstrip("\n")
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO    stagedoor.test_logs"
                    rf"\[{os.getpid()}\]: hello redis://u:\*\*\*@h order_id=7 slot=0$", line)

    pipe = io.StringIO()
    handler = setup_logging("auto", "info", pipe, logger=logger)
    assert isinstance(handler.formatter, JsonFormatter)
    logger.info("hello")
    assert lines(pipe)[0]["msg"] == "hello"
    assert tty.getvalue().count("\n") == 1  # the first handler was replaced, not added to
    assert [h for h in logger.handlers if h.formatter is not None
            and isinstance(h.formatter, JsonFormatter | TextFormatter)] == [handler]


def test_text_forced_and_exception(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("text", "info", out, logger=logger)
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError:
        logger.exception("failed")
    text = out.getvalue()
    assert "ERROR   stagedoor.test_logs" in text
    assert "ZeroDivisionError: division by zero" in text


def test_from_settings_and_root(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    level = root.level
    handler = setup_logging(Settings(log_format="json", log_level="error"))
    try:
        assert handler in root.handlers
        assert root.level == logging.ERROR
        logging.getLogger("stagedoor.x").error("to stderr", extra={"slot": 2})
        doc = orjson.loads(capsys.readouterr().err.splitlines()[-1])
        assert doc["msg"] == "to stderr" and doc["slot"] == 2
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_bad_format_or_level() -> None:
    with pytest.raises(ValueError, match="log format"):
        setup_logging("xml", "info", io.StringIO(), logger=logging.getLogger("stagedoor.t2"))
    with pytest.raises(ValueError, match="log level"):
        setup_logging("json", "loud", io.StringIO(), logger=logging.getLogger("stagedoor.t2"))


# -- every extra kept, job fields on every line of a job, journald ------------------------------

def test_every_extra_is_kept_and_core_fields_cannot_be_shadowed(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", "info", out, logger=logger)
    logger.info("x", extra={"zeta": [1, 2], "alpha": {"a": 1}, "ts": "fake", "pid": 0,
                            "blob": b"\xffraw", "_private": 1})
    [doc] = lines(out)
    assert list(doc)[:5] == list(CORE_KEYS) and doc["pid"] == os.getpid()
    assert doc["extra.ts"] == "fake" and doc["extra.pid"] == 0
    assert doc["zeta"] == "[1, 2]" and doc["alpha"] == "{'a': 1}"
    assert doc["blob"] == "\\xffraw"
    assert "_private" not in doc
    assert list(doc)[5:] == ["zeta", "alpha", "extra.ts", "extra.pid", "blob"]  # as given


def test_job_context_puts_the_job_on_every_line(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", "info", out, logger=logger)
    other = logging.getLogger("stagedoor.test_logs.handler_module")  # a handler's own logger
    job = {"request_id": "r-1", "trace": "00-" + "a" * 32 + "-" + "b" * 16 + "-01",
           "entry_id": "1-0", "kind": "send_receipt", "order_id": 7, "outbox_id": 9,
           "deliveries": 1, "consumer": "h-00"}
    logger.info("before")
    with job_context(job):
        other.info("inside", extra={"customer_tier": "gold"})
        logger.info("override", extra={"kind": "explicit"})
    logger.info("after")
    before, inside, override, after = lines(out)
    assert not set(JOB_KEYS) & set(before) and not set(JOB_KEYS) & set(after)
    assert {k: inside[k] for k in JOB_KEYS} == job
    assert inside["customer_tier"] == "gold" and inside["logger"].endswith("handler_module")
    assert override["kind"] == "explicit" and override["request_id"] == "r-1"


def test_text_lines_carry_the_job_too(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("text", "info", out, logger=logger)
    with job_context({"request_id": "r-2", "trace": "t-2"}):
        logger.info("hello", extra={"customer_tier": "gold"})
    assert out.getvalue().rstrip().endswith("hello request_id=r-2 trace=t-2 customer_tier=gold")


def test_journal_format_has_the_syslog_priority(logger: logging.Logger) -> None:
    out = io.StringIO()
    handler = setup_logging("journal", "debug", out, logger=logger)
    assert isinstance(handler.formatter, JournalFormatter)
    for level in ("debug", "info", "warning", "error", "critical"):
        getattr(logger, level)(level)
    got = out.getvalue().splitlines()
    assert [line[:3] for line in got] == ["<7>", "<6>", "<4>", "<3>", "<2>"]
    assert [orjson.loads(line[3:])["msg"] for line in got] == [
        "debug", "info", "warning", "error", "critical"]


def test_auto_picks_journal_when_stderr_is_the_journal(
        tmp_path: Path, logger: logging.Logger, monkeypatch: pytest.MonkeyPatch) -> None:
    with open(tmp_path / "journal", "w") as stream, open(tmp_path / "other", "w") as other:
        st = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        assert journal_stream(stream) and not journal_stream(other)
        assert not journal_stream(stream, {"JOURNAL_STREAM": "junk"})
        handler = setup_logging("auto", "info", stream, logger=logger)
        assert isinstance(handler.formatter, JournalFormatter)
        logger.warning("to the journal")
        handler.flush()
        # a child that inherited JOURNAL_STREAM but writes elsewhere gets plain JSON
        handler = setup_logging("auto", "info", other, logger=logger)
        assert type(handler.formatter) is JsonFormatter
    assert (tmp_path / "journal").read_text().startswith("<4>{")
