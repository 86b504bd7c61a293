"""AlterConfigs (key 33), versions 0-2: replace a resource's whole set of dynamic configs.

Resources: a topic (its overrides; keys left out revert to the broker's value), this broker by node id,
or the cluster-wide broker default (name ""). Only keys marked dynamic in the config table may change on
a broker; every value is checked against the table, and a refusal is INVALID_CONFIG naming the key.
Changes apply at once and survive restarts. `validate_only` checks without changing anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pybroker.broker.config_changes import Change, alter_resource
from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import config_rule
from pybroker.config.definitions import ConfigDef
from pybroker.config.types import ConfigError
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.alter_configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)


def _replace_with(configs: list[AlterableConfig]) -> Change:
    def change(current: Mapping[str, str], definitions: Mapping[str, ConfigDef],
               effective: Callable[[str], str | None]) -> dict[str, str]:
        new: dict[str, str] = {}
        for entry in configs:
            if entry.name in new:
                raise ConfigError(entry.name, "appears more than once in the request")
            if entry.value is not None:  # a null value leaves the key unset
                new[entry.name] = entry.value
        return new

    return change


@handler(ApiKey.ALTER_CONFIGS, versions=(0, 2),
         authorize=config_rule(Op.ALTER_CONFIGS, AlterConfigsResourceResponse, "responses"))
def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for resource in request.resources:
        code, message = alter_resource(ctx.state, resource.resource_type, resource.resource_name,
                                       _replace_with(resource.configs), bool(request.validate_only))
        responses.append(AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                      resource_type=resource.resource_type,
                                                      resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
