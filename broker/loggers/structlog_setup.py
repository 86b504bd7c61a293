"""structlog set-up: JSON lines for machines, a console renderer for people.

JSON is chosen when stdout is not a terminal, so a container's log pipeline gets one object a line.
Every line has `timestamp` (ISO 8601, UTC), `level`, `logger` and `event`; the rest are the event's own
fields (documented in docs/logging.md). Records from the standard library's `logging` (asyncio,
libraries) go through the same renderer, so nothing reaches the output in another format.
Nothing on the request path logs at info level; errors carry their context (client, api, partition).
Each logger's level can change at runtime (`pybroker.broker.loggers.levels`: Kafka's broker-logger
configs), so the level is checked by the first processor rather than baked into the bound loggers.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

from pybroker.broker.loggers.levels import LEVELS as LOGGER_LEVELS
from pybroker.broker.loggers.levels import drop_below_level

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FORMATS = ("json", "console")
#: --log-level -> Kafka's name of the root logger's level
KAFKA_NAMES = {"debug": "DEBUG", "info": "INFO", "warning": "WARN", "error": "ERROR"}
#: the format and level `configure_logging` chose, read (on the event loop, at startup) by whoever decides
#: how much a line should say: a person at a terminal wants a short start, a log pipeline every detail
CHOSEN = {"format": "json", "level": "info"}


def for_a_person() -> bool:
    """True when the log goes to a person (console format) who did not ask for debug detail."""
    return CHOSEN["format"] == "console" and CHOSEN["level"] != "debug"


def configure_logging(fmt: str | None = None, level: str = "info", stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    if fmt is None:
        fmt = "console" if out.isatty() else "json"
    CHOSEN.update(format=fmt, level=level)
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    LOGGER_LEVELS.reset(KAFKA_NAMES[level])
    structlog.configure(
        processors=[
            drop_below_level,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            timestamper,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),  # levels: drop_below_level
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, structlog.processors.add_log_level, timestamper],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer]))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(LEVELS[level])


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    LOGGER_LEVELS.register(name)
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name).bind(logger=name)
    return logger
