"""Client-metrics config resources (type 16) in IncrementalAlterConfigs and DescribeConfigs.

IncrementalAlterConfigs SETs or DELETEs `metrics`, `interval.ms` and `match` (APPEND / SUBTRACT on the
two lists), all operations of a resource checked together before anything changes; DescribeConfigs
lists a subscription's three configs (source CLIENT_METRICS_CONFIG; defaults for those not set), and an
unknown name answers nothing, as Kafka answers a client-metrics resource with no configs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.telemetry.subscriptions import CONFIGS, MATCH, METRICS, SubscriptionError
from pybroker.protocol.errors import ErrorCode
from pybroker.storage.errors import StorageError

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

log = get_logger("pybroker.config")

CLIENT_METRICS_RESOURCE = 16
CLIENT_METRICS_CONFIG = 7  # DescribeConfigs config source
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LISTS = (METRICS, MATCH)


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def alter_client_metrics(state: BrokerState, name: str, changes: list[tuple[str, int, str | None]],
                         validate_only: bool) -> tuple[int, str | None]:
    """(error code, message) for one client-metrics resource of an IncrementalAlterConfigs request."""
    subscriptions = state.client_metrics.subscriptions
    configs = subscriptions.configs(name) or {}
    try:
        for key, operation, value in changes:
            if key not in CONFIGS:
                raise SubscriptionError(f"Unknown client-metrics config name: {key}")
            if operation == SET:
                if value is None:
                    raise SubscriptionError(f"Null value not supported for : {key}", request=True)
                configs[key] = value
            elif operation == DELETE:
                configs.pop(key, None)
            elif operation in (APPEND, SUBTRACT) and key in LISTS:
                current = _items(configs.get(key, ""))
                given = _items(value or "")
                items = current + [v for v in given if v not in current] if operation == APPEND \
                    else [v for v in current if v not in given]
                configs[key] = ",".join(items)
            else:
                raise SubscriptionError(f"Config value {'append' if operation == APPEND else 'subtract'} is not "
                                        f"allowed for config key: {key}" if operation in (APPEND, SUBTRACT)
                                        else f"Unknown operation type {operation}", request=True)
        subscriptions.replace(name, configs, validate_only)
    except SubscriptionError as exc:
        return (ErrorCode.INVALID_REQUEST if exc.request else ErrorCode.INVALID_CONFIG), str(exc)
    except (OSError, StorageError) as exc:
        log.error("cannot persist client-metrics subscriptions", resource=name, error=str(exc))
        return ErrorCode.KAFKA_STORAGE_ERROR, f"The configs could not be persisted: {exc}"
    if not validate_only:
        log.info("client-metrics subscription changed", subscription=name, configs=configs)
    return ErrorCode.NONE, None


def described(state: BrokerState, name: str) -> list[tuple[str, str, bool, str]]:
    """(key, value, is_default, documentation) of each config of subscription `name` (none if unknown)."""
    configs = state.client_metrics.subscriptions.configs(name)
    if configs is None:
        return []
    return [(key, configs.get(key, default), key not in configs, doc) for key, (default, doc) in CONFIGS.items()]
