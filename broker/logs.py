"""structlog set-up: JSON lines for machines, a console renderer for people.

JSON is chosen when stdout is not a terminal, so a container's log pipeline gets one object a line.
Every line has `timestamp` (ISO 8601, UTC), `level`, `logger` and `event`; the rest are the event's own
fields (documented in docs/logging.md). Records from the standard library's `logging` (asyncio,
libraries) go through the same renderer, so nothing reaches the output in another format.
Nothing on the request path logs at info level; errors carry their context (client, api, partition).
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FORMATS = ("json", "console")


def configure_logging(fmt: str | None = None, level: str = "info", stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    if fmt is None:
        fmt = "console" if out.isatty() else "json"
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            timestamper,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
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
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name).bind(logger=name)
    return logger
