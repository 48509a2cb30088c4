"""stagedoor.ops.logs: JSON lines, text on a terminal, job extras, passwords redacted."""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator

import orjson
import pytest

from stagedoor.config import Settings
from stagedoor.ops.logs import EXTRA_KEYS, JsonFormatter, TextFormatter, redact, setup_logging

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
        "not_ours": "dropped"})
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
    assert "not_ours" not in doc
    assert list(doc)[:5] == ["ts", "level", "logger", "msg", "pid"]
    assert set(doc) - {"ts", "level", "logger", "msg", "pid"} == set(EXTRA_KEYS)


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
