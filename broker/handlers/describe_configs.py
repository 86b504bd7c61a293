"""DescribeConfigs (key 32), versions 0-4: topic and broker resources, from the one config table.

Every config comes with its effective value and source (topic override, static broker config or
default); v1+ add synonyms (the broker keys that stand behind a topic key), v3+ the type and the
documentation. Broker configs that cannot change at runtime are read-only, as in Kafka. A broker-logger
resource (this node's id) lists every logger with its effective level (`pybroker.broker.loggers.levels`),
source DYNAMIC_BROKER_LOGGER_CONFIG, as Kafka lists its log4j loggers. A client-metrics resource
(KIP-714) lists its subscription's configs (none for an unknown name). A group resource lists the share
groups' keys and the streams groups' (`pybroker.broker.streams_groups.group_configs`): the group's value, else
the broker's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.loggers.levels import LEVELS as LOGGER_LEVELS
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import config_rule
from pybroker.broker.share.group_configs import GROUP_RESOURCE
from pybroker.broker.streams_groups.group_configs import CONFIG_TYPES as STREAMS_CONFIG_TYPES
from pybroker.broker.telemetry.resource import CLIENT_METRICS_CONFIG, CLIENT_METRICS_RESOURCE, described
from pybroker.config.broker_config import ConfigSource, ResolvedConfig
from pybroker.config.definitions import BROKER, TOPIC
from pybroker.config.types import PARSERS
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8
DYNAMIC_BROKER_LOGGER_CONFIG = 6
#: Kafka's config sources of a group config: set for the group, or the default
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
#: the group keys whose broker-wide synonym keeps the group key's own name (every other key's is `group.<key>`)
SAME_NAME_GROUP_KEYS = frozenset({"share.auto.offset.reset", "share.isolation.level", "share.renew.acknowledge.enable"})


def _group_synonyms(key: str, value: str, is_default: bool, default: str) -> list[DescribeConfigsSynonym]:
    """Kafka's synonyms of a group config: the group's own value when set, then the broker's, which Kafka
    names with the `group.` prefix and always reports as DEFAULT_CONFIG (as Kafka 4.4's kafka-configs shows)."""
    own = [] if is_default else [DescribeConfigsSynonym(name=key, value=value, source=GROUP_CONFIG)]
    broker_key = key if key in SAME_NAME_GROUP_KEYS else f"group.{key}"
    return [*own, DescribeConfigsSynonym(name=broker_key, value=default, source=DEFAULT_CONFIG)]


def _group_default(state: BrokerState, key: str, share_defaults: dict[str, str]) -> str:
    if key in share_defaults:
        return share_defaults[key]
    return state.groups.coordinator.streams.group_configs.broker_text(key, state.groups.coordinator.config)


def _entry(resolved: ResolvedConfig, synonyms: bool, docs: bool, read_only: bool) -> DescribeConfigsResourceResult:
    definition = resolved.definition
    return DescribeConfigsResourceResult(
        name=definition.key,
        value=None if definition.sensitive else resolved.text,
        read_only=read_only,
        config_source=int(resolved.source),
        is_default=resolved.source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=definition.sensitive,
        synonyms=[DescribeConfigsSynonym(name=k, value=v, source=int(s)) for k, v, s in resolved.synonyms]
        if synonyms else [],
        config_type=PARSERS[definition.type][1],
        documentation=definition.doc if docs else None,
    )


def _selected(keys: Iterable[str], wanted: list[str] | None) -> list[str]:
    return list(keys) if wanted is None else [k for k in wanted if k in set(keys)]


@handler(ApiKey.DESCRIBE_CONFIGS, versions=(0, 4),
         authorize=config_rule(Op.DESCRIBE_CONFIGS, DescribeConfigsResult, "results"))
def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    state = ctx.state
    synonyms = bool(request.include_synonyms)
    docs = bool(request.include_documentation)
    results: list[DescribeConfigsResult] = []
    for resource in request.resources:
        result = DescribeConfigsResult(error_code=ErrorCode.NONE, error_message=None,
                                       resource_type=resource.resource_type,
                                       resource_name=resource.resource_name, configs=[])
        results.append(result)
        wanted = resource.configuration_keys
        if resource.resource_type == TOPIC_RESOURCE:
            info = state.topics.get(resource.resource_name)
            if info is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # no message, as Kafka's
                continue
            result.configs = [_entry(state.config.resolve_topic(key, info.configs), synonyms, docs, False)
                              for key in _selected(TOPIC, wanted)]
        elif resource.resource_type == BROKER_RESOURCE:
            if resource.resource_name not in ("", str(state.node_id)):
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"Unexpected broker id {resource.resource_name}, expected {state.node_id}."
                continue
            result.configs = [_entry(state.config.resolve_broker(key), synonyms, docs, not BROKER[key].dynamic)
                              for key in _selected(BROKER, wanted)]
        elif resource.resource_type == BROKER_LOGGER_RESOURCE:
            if resource.resource_name != str(state.node_id):
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = (f"Unexpected broker id, expected {state.node_id} but received "
                                        f"{resource.resource_name}" if resource.resource_name
                                        else "Broker id must not be empty")
                continue
            result.configs = [DescribeConfigsResourceResult(
                name=name, value=LOGGER_LEVELS.level(name), read_only=False,
                config_source=DYNAMIC_BROKER_LOGGER_CONFIG, is_default=False, is_sensitive=False, synonyms=[],
                config_type=0, documentation=None) for name in _selected(LOGGER_LEVELS.names(), wanted)]
        elif resource.resource_type == CLIENT_METRICS_RESOURCE:
            # an unset key is the default, without synonyms; a set one names itself (Kafka 4.4's answer)
            result.configs = [DescribeConfigsResourceResult(
                name=key, value=value, read_only=False,
                config_source=DEFAULT_CONFIG if is_default else CLIENT_METRICS_CONFIG, is_default=is_default,
                is_sensitive=False, synonyms=[DescribeConfigsSynonym(name=key, value=value, source=CLIENT_METRICS_CONFIG)]
                if synonyms and not is_default else [], config_type=0, documentation=doc if docs else None)
                for key, value, is_default, doc in described(state, resource.resource_name)
                if wanted is None or key in wanted]
        elif resource.resource_type == GROUP_RESOURCE:
            share_defaults = state.shares.config_defaults()
            result.configs = [DescribeConfigsResourceResult(
                name=key, value=value, read_only=False, config_source=GROUP_CONFIG if not is_default
                else DEFAULT_CONFIG, is_default=is_default, is_sensitive=False,
                synonyms=_group_synonyms(key, value, is_default, _group_default(state, key, share_defaults))
                if synonyms else [],
                config_type=STREAMS_CONFIG_TYPES.get(key, 0), documentation=None)
                for key, value, is_default in state.shares.group_configs.described(
                    resource.resource_name, share_defaults)
                + state.groups.coordinator.streams.group_configs.described(
                    resource.resource_name, state.groups.coordinator.config)
                if wanted is None or key in wanted]
        else:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Unsupported resource type {resource.resource_type}."
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
