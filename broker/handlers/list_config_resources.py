"""ListConfigResources (key 74), versions 0-1: the resources that have configs (KIP-1142).

v0 was KIP-714's ListClientMetricsResources and lists client-metrics resources only. v1 names the
resource types wanted (empty: every type Kafka lists) and each resource's type: every topic (2), this
broker (4) and its loggers (8) by node id, the client-metrics subscriptions configured (16) and the
groups with configs of their own (32: share and streams keys, `broker/share/group_configs.py` and
`broker/streams_groups/group_configs.py`; `kafka-configs --describe --entity-type groups` asks this first). A type Kafka does not list is
refused with UNSUPPORTED_VERSION, as Kafka does.

Authorizes: DESCRIBE_CONFIGS on the cluster; refused with a top-level CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import cluster_only, top_level_refusal
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


def _client_metrics(state: BrokerState) -> Iterable[str]:
    subscriptions = getattr(state, "client_metrics", None)
    return [] if subscriptions is None else subscriptions.names()


def _groups(state: BrokerState) -> Iterable[str]:
    """The groups with a share or a streams config of their own (a group may have both: listed once)."""
    names: set[str] = set()
    shares = getattr(state, "shares", None)
    if shares is not None and getattr(shares, "group_configs", None) is not None:
        names.update(name for name, configs in shares.group_configs.configs.items() if configs)
    groups = getattr(state, "groups", None)
    streams = getattr(getattr(getattr(groups, "coordinator", None), "streams", None), "group_configs", None)
    if streams is not None:
        names.update(name for name, configs in streams.configs.items() if configs)
    return sorted(names)


#: resource type -> the names of its resources, in the order listed
LISTERS: dict[int, Callable[[BrokerState], Iterable[str]]] = {
    TOPIC: lambda state: sorted(state.logs.topics()),
    BROKER: lambda state: [str(state.node_id)],
    BROKER_LOGGER: lambda state: [str(state.node_id)],
    CLIENT_METRICS: _client_metrics,
    GROUP: _groups,
}


@handler(ApiKey.LIST_CONFIG_RESOURCES, versions=(0, 1),
         authorize=cluster_only(Op.DESCRIBE_CONFIGS, top_level_refusal(ApiKey.LIST_CONFIG_RESOURCES)))
def handle_list_config_resources(ctx: RequestContext,
                                 request: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    wanted = request.resource_types if ctx.api_version >= 1 else [CLIENT_METRICS]
    if not wanted:
        wanted = list(LISTERS)
    if any(t not in LISTERS for t in wanted):
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
                                           config_resources=[])
    resources = [ConfigResource(resource_name=name, resource_type=t)
                 for t in dict.fromkeys(wanted) for name in LISTERS[t](ctx.state)]
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=resources)
