"""Log set-up: JSON lines with the documented keys, standard-library records rendered the same way."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from pybroker.broker.loggers.structlog_setup import configure_logging, get_logger


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers, root.level = handlers, level
    structlog.reset_defaults()


def test_json_lines_for_ours_and_the_standard_librarys(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    get_logger("pybroker.test").info("hello", topic="t", partition=0)
    get_logger("pybroker.test").debug("not shown")
    logging.getLogger("asyncio").warning("from the stdlib %s", "too")
    try:
        raise ValueError("boom")
    except ValueError:
        get_logger("pybroker.test").exception("failed", client_id="c1")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["hello", "from the stdlib too", "failed"]
    for line in lines:
        assert {"timestamp", "level", "logger", "event"} <= set(line)
    assert lines[0]["topic"] == "t" and lines[1]["logger"] == "asyncio" and lines[1]["level"] == "warning"
    assert "ValueError: boom" in lines[2]["exception"]


def test_console_format_is_not_json(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("console", "info", stream=out)
    get_logger("pybroker.test").info("hello", topic="t")
    assert "hello" in out.getvalue() and not out.getvalue().startswith("{")
