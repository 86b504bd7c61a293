"""IncrementalAlterConfigs (key 44), versions 0-1: SET, DELETE, APPEND or SUBTRACT single keys.

The same resources and rules as AlterConfigs (topics, this broker, the cluster-wide broker default;
only dynamic broker keys; INVALID_CONFIG with a message for any refused key or value), but each
config names an operation on the current overrides, so keys not mentioned keep their values.
A topic's DELETE of a key pybroker does not know succeeds and changes nothing, as on Kafka (MirrorMaker 2
resets Kafka-only keys so).
APPEND and SUBTRACT apply to list configs only (`cleanup.policy`, `log.cleanup.policy`).
A broker-logger resource (this node's id) SETs or DELETEs loggers' levels at once, as Kafka's
`kafka-configs --entity-type broker-loggers` does (`pybroker.broker.loggers.logger_configs`); a client-metrics
resource (KIP-714) sets a telemetry subscription (`pybroker.broker.telemetry.resource`); a group resource sets a
group's configs: its `streams.*` keys go to the streams groups' store
(`pybroker.broker.streams_groups.group_configs`), the others to the share groups'
(`pybroker.broker.share.group_configs`); both are checked before either is changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pybroker.broker.config_changes import TOPIC_RESOURCE, Change, alter_resource
from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.loggers.logger_configs import BROKER_LOGGER_RESOURCE, alter_logger_levels
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import config_rule
from pybroker.broker.share.group_configs import GROUP_RESOURCE
from pybroker.broker.streams_groups.group_configs import PREFIX as STREAMS_PREFIX
from pybroker.broker.telemetry.resource import CLIENT_METRICS_RESOURCE, alter_client_metrics
from pybroker.config.alter_ops import apply_operations
from pybroker.config.definitions import ConfigDef
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)


def _operations(configs: list[AlterableConfig], topic: bool) -> Change:
    changes = [(entry.name, entry.config_operation, entry.value) for entry in configs]

    def change(current: Mapping[str, str], definitions: Mapping[str, ConfigDef],
               effective: Callable[[str], str | None]) -> dict[str, str]:
        return apply_operations(current, changes, definitions, effective, unknown_delete_ok=topic)

    return change


def _alter_group(ctx: RequestContext, group_id: str, changes: list[tuple[str, int, str | None]],
                 validate_only: bool) -> tuple[ErrorCode, str | None]:
    """A group's keys, each to its store: all are checked first, then each store changes (all or none)."""
    streams = [c for c in changes if c[0].startswith(STREAMS_PREFIX)]
    others = [c for c in changes if not c[0].startswith(STREAMS_PREFIX)]
    coordinator = ctx.state.groups.coordinator
    stores: list[Callable[[bool], tuple[ErrorCode, str | None]]] = []
    if streams:
        stores.append(lambda only: coordinator.streams.group_configs.alter(group_id, streams, only,
                                                                           coordinator.config))
    if others or not streams:
        stores.append(lambda only: ctx.state.shares.group_configs.alter(group_id, others, only))
    for alter in stores:
        code, message = alter(True)
        if code is not ErrorCode.NONE:
            return code, message
    if validate_only:
        return ErrorCode.NONE, None
    for alter in stores:
        code, message = alter(False)
        if code is not ErrorCode.NONE:
            return code, message
    return ErrorCode.NONE, None


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1),
         authorize=config_rule(Op.ALTER_CONFIGS, AlterConfigsResourceResponse, "responses"))
def handle_incremental_alter_configs(ctx: RequestContext,
                                     request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = []
    for resource in request.resources:
        if resource.resource_type == BROKER_LOGGER_RESOURCE:
            code, message = alter_logger_levels(ctx.state, resource.resource_name, [
                (c.name, c.config_operation, c.value) for c in resource.configs], bool(request.validate_only))
        elif resource.resource_type == GROUP_RESOURCE:
            code, message = _alter_group(ctx, resource.resource_name, [
                (c.name, c.config_operation, c.value) for c in resource.configs], bool(request.validate_only))
        elif resource.resource_type == CLIENT_METRICS_RESOURCE:
            code, message = alter_client_metrics(ctx.state, resource.resource_name, [
                (c.name, c.config_operation, c.value) for c in resource.configs], bool(request.validate_only))
        else:
            code, message = alter_resource(ctx.state, resource.resource_type, resource.resource_name,
                                           _operations(resource.configs, resource.resource_type == TOPIC_RESOURCE),
                                           bool(request.validate_only))
        responses.append(AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                      resource_type=resource.resource_type,
                                                      resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
