"""What AlterConfigs and IncrementalAlterConfigs share: one resource's overrides, changed by a function.

Both APIs name a resource (a topic, this broker, or the cluster-wide broker default) and describe its
new overrides: AlterConfigs as a whole new set, IncrementalAlterConfigs as operations on the current
set. Each handler passes a `Change` (current overrides -> new overrides); this module finds the
resource, validates the result against the config table, applies and persists it unless
`validate_only`, and turns every refusal into a Kafka error code with a message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pybroker.broker.dynamic_configs import CLUSTER_DEFAULT, NODE
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.config.broker_config import BROKER_KEYS, validate_topic_overrides
from pybroker.config.definitions import TOPIC, ConfigDef
from pybroker.config.types import ConfigError, render
from pybroker.protocol.errors import ErrorCode
from pybroker.storage.errors import StorageError, UnknownTopicError

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

log = get_logger("pybroker.config")

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8

#: (current overrides, the config table of the resource, effective value of a key as text) -> new overrides
Change = Callable[[Mapping[str, str], Mapping[str, ConfigDef], Callable[[str], str | None]], dict[str, str]]
Outcome = tuple[int, str | None]


def alter_resource(state: BrokerState, resource_type: int, name: str, change: Change,
                   validate_only: bool) -> Outcome:
    """(error code, message) for one resource of an AlterConfigs or IncrementalAlterConfigs request."""
    try:
        if resource_type == TOPIC_RESOURCE:
            _alter_topic(state, name, change, validate_only)
        elif resource_type == BROKER_RESOURCE:
            _alter_broker(state, name, change, validate_only)
        elif resource_type == BROKER_LOGGER_RESOURCE:
            return ErrorCode.INVALID_REQUEST, "Broker logger configs cannot be altered; use --log-level."
        else:
            return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}."
    except ConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    except UnknownTopicError:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
    except (OSError, StorageError) as exc:
        log.error("cannot persist configs", resource_type=resource_type, resource=name, error=str(exc))
        return ErrorCode.KAFKA_STORAGE_ERROR, f"The configs could not be persisted: {exc}"
    return ErrorCode.NONE, None


def _alter_topic(state: BrokerState, name: str, change: Change, validate_only: bool) -> None:
    info = state.topics.get(name)
    if info is None:
        raise UnknownTopicError(name)
    current = dict(info.configs)
    new = validate_topic_overrides(change(current, TOPIC, lambda key: state.config.resolve_topic(key, current).text))
    if validate_only or new == current:
        return
    state.logs.alter_topic_configs(name, new)
    log.info("topic configs changed", topic=name, configs=new,
             changed=sorted(k for k in set(current) | set(new) if current.get(k) != new.get(k)))


def _alter_broker(state: BrokerState, name: str, change: Change, validate_only: bool) -> None:
    if name == "":
        layer = CLUSTER_DEFAULT
    elif name == str(state.node_id):
        layer = NODE
    else:
        raise ConfigError("resource_name", f"unexpected broker id {name!r}; this broker is {state.node_id}")
    dynamic = state.dynamic_configs
    current = dynamic.overrides(layer)

    def effective(key: str) -> str | None:
        return render(BROKER_KEYS[key].type, state.config.get(key))

    # BROKER_KEYS also knows Kafka's listener.name.<name>.ssl.* keys (a listener's dynamic TLS update)
    dynamic.replace(layer, change(current, BROKER_KEYS, effective), validate_only=validate_only)
