"""Each logger's level, changeable at runtime: Kafka's broker-logger config resource (type 8).

`kafka-configs --entity-type broker-loggers --entity-name <node id>` describes every logger with its
effective level and SETs or DELETEs one logger's level, at once and until the process ends (Kafka does
not persist them either). Our loggers are named `pybroker.<component>`; their ancestors (`pybroker`)
and `root` may be set too, and a logger without a level of its own takes its nearest ancestor's, as
in log4j. Levels are Kafka's names (TRACE, DEBUG, INFO, WARN, ERROR, FATAL; TRACE logs as DEBUG).

The filter is a structlog processor placed first in the chain (`drop_below_level`), so a level set
here applies to loggers already bound; the standard library logger of the same name gets the level
too (records from libraries go through the same rules).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import structlog

ROOT = "root"
#: Kafka's log levels (LogLevelConfig.VALID_LOG_LEVELS) and the stdlib numbers they filter at
KAFKA_LEVELS: Mapping[str, int] = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
                                   "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
#: a structlog method's level (what `log.warning(...)` logs at)
METHOD_LEVELS: Mapping[str, int] = {
    "debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO, "warning": logging.WARNING,
    "warn": logging.WARNING, "error": logging.ERROR, "err": logging.ERROR, "exception": logging.ERROR,
    "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


class LogLevelError(ValueError):
    """A change refused: `invalid_config` tells INVALID_CONFIG (a bad name or level) from INVALID_REQUEST."""

    def __init__(self, message: str, *, invalid_config: bool) -> None:
        super().__init__(message)
        self.invalid_config = invalid_config


class LogLevels:
    """Known logger names, the levels set on them, and each name's effective threshold."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: set[str] = {ROOT}
        self._set: dict[str, str] = {ROOT: "INFO"}
        self._thresholds: dict[str, int] = {}
        self._saved_root: int | None = None  # the stdlib root level before a SET of root changed it

    def register(self, name: str) -> None:
        """A logger the broker uses (and, so they may be set too, its dotted ancestors)."""
        parts = name.split(".")
        with self._lock:
            self._known.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))

    def names(self) -> list[str]:
        return sorted(self._known)

    def exists(self, name: str) -> bool:
        return name in self._known

    def level(self, name: str) -> str:
        """`name`'s effective level: its own, else its nearest ancestor's, else root's."""
        while True:
            if name in self._set:
                return self._set[name]
            if "." not in name:
                return self._set[ROOT]
            name = name.rsplit(".", 1)[0]

    def threshold(self, name: str) -> int:
        found = self._thresholds.get(name)
        if found is None:
            found = self._thresholds[name] = KAFKA_LEVELS[self.level(name)]
        return found

    def validate(self, operation: str, name: str, value: str | None) -> None:
        """Kafka's checks (ConfigAdminManager.validateLogLevelConfigs), its words."""
        if operation == "SET":
            self._check_exists(name)
            if value not in KAFKA_LEVELS:
                raise LogLevelError(
                    f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                    f"Valid log levels are {', '.join(KAFKA_LEVELS)}", invalid_config=True)
        elif operation == "DELETE":
            self._check_exists(name)
            if name == ROOT:
                raise LogLevelError(f"Removing the log level of the {ROOT} logger is not allowed",
                                    invalid_config=False)
        elif operation in ("APPEND", "SUBTRACT"):
            raise LogLevelError(f"{operation} operation is not allowed for the BROKER_LOGGER resource",
                                invalid_config=False)
        else:
            raise LogLevelError(f"Unknown operation type {operation} is not allowed for the BROKER_LOGGER "
                                "resource", invalid_config=False)

    def _check_exists(self, name: str) -> None:
        if not self.exists(name):
            raise LogLevelError(f"Logger {name} does not exist!", invalid_config=True)

    def set(self, name: str, level: str) -> None:
        with self._lock:
            self._set[name] = level
            self._thresholds = {}
            if name == ROOT and self._saved_root is None:
                self._saved_root = logging.getLogger().level
        _stdlib(name).setLevel(max(KAFKA_LEVELS[level], 1))

    def unset(self, name: str) -> None:
        if name == ROOT:
            return
        with self._lock:
            self._set.pop(name, None)
            self._thresholds = {}
        _stdlib(name).setLevel(logging.NOTSET)

    def reset(self, root_level: str = "INFO") -> None:
        """Forget every level set (a new configuration of the process's logging)."""
        with self._lock:
            for name in list(self._set):
                if name != ROOT:
                    _stdlib(name).setLevel(logging.NOTSET)
            if self._saved_root is not None:
                logging.getLogger().setLevel(self._saved_root)
                self._saved_root = None
            self._set = {ROOT: root_level}
            self._thresholds = {}


def _stdlib(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


#: the process's loggers are process-wide, as the standard library's are
LEVELS = LogLevels()


def drop_below_level(logger: Any, method_name: str, event_dict: Any) -> Any:
    """structlog processor: drop an event below its logger's effective level."""
    name = event_dict.get("logger") or ROOT
    if METHOD_LEVELS.get(method_name, logging.INFO) < LEVELS.threshold(name):
        raise structlog.DropEvent
    return event_dict
