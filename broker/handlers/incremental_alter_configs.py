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
share group's configs (`pybroker.broker.share.group_configs`).
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
from pybroker.broker.telemetry.resource import CLIENT_METRICS_RESOURCE, alter_client_metrics
from pybroker.config.alter_ops import apply_operations
from pybroker.config.definitions import ConfigDef
from pybroker.protocol.api_keys import ApiKey
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
            code, message = ctx.state.shares.group_configs.alter(resource.resource_name, [
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
