"""IncrementalAlterConfigs on a broker-logger resource: set or unset loggers' levels, now.

The resource is named by this node's id (anything else is INVALID_REQUEST, Kafka's words). Every
operation is checked before any is applied (`LogLevels.validate`: an unknown logger or level is
INVALID_CONFIG, DELETE of root or APPEND/SUBTRACT INVALID_REQUEST), so a refused request changes
nothing; `validate_only` checks and stops. Each change is logged once at info level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.broker.loggers.levels import LEVELS, LogLevelError
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

log = get_logger("pybroker.config")

BROKER_LOGGER_RESOURCE = 8
OPERATIONS = {0: "SET", 1: "DELETE", 2: "APPEND", 3: "SUBTRACT"}


def alter_logger_levels(state: BrokerState, name: str, changes: list[tuple[str, int, str | None]],
                        validate_only: bool) -> tuple[int, str | None]:
    """(error code, message) for one broker-logger resource: (logger, operation, level) applied in order."""
    try:
        node = int(name)
    except ValueError:
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
    if node != state.node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {state.node_id}, but received {name}"
    try:
        for logger, operation, value in changes:
            LEVELS.validate(OPERATIONS.get(operation, str(operation)), logger, value)
    except LogLevelError as exc:
        return (ErrorCode.INVALID_CONFIG if exc.invalid_config else ErrorCode.INVALID_REQUEST), str(exc)
    if validate_only:
        return ErrorCode.NONE, None
    for logger, operation, value in changes:
        if OPERATIONS[operation] == "SET" and value is not None:
            LEVELS.set(logger, value)
            log.info("log level changed", logger_name=logger, level=value)
        else:
            LEVELS.unset(logger)
            log.info("log level unset", logger_name=logger, level=LEVELS.level(logger))
    return ErrorCode.NONE, None
