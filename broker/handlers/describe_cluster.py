"""DescribeCluster (key 60), versions 0-2: this node as the whole cluster, and its own controller.

The one broker is listed with the endpoint of the listener the client came in on (as Metadata
answers), never fenced (v2's `include_fenced_brokers` changes nothing). The controller is this node:
it is both. v1+ asks for an endpoint type: brokers (1) are served; controllers (2) are answered with
MISMATCHED_ENDPOINT_TYPE as a Kafka broker answers (clients ask a controller listener for those), and
any other type with UNSUPPORTED_ENDPOINT_TYPE; v0 carries neither code, so INVALID_REQUEST.

Authorizes: nothing. With `include_cluster_authorized_operations` the answer's bit set is the
principal's operations on the cluster (the authorization table fills it in; without an authorizer,
every cluster operation).
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.handlers.metadata import CLUSTER_OPERATIONS, UNSET_OPERATIONS
from pybroker.broker.security.authorization_cluster import describe_cluster_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)

BROKERS, CONTROLLERS = 1, 2


@handler(ApiKey.DESCRIBE_CLUSTER, versions=(0, 2), authorize=describe_cluster_rule)
def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    state = ctx.state
    wanted = request.endpoint_type
    if wanted != BROKERS:
        refused = ErrorCode.MISMATCHED_ENDPOINT_TYPE if wanted == CONTROLLERS else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        message = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                   "CONTROLLER" if wanted == CONTROLLERS else f"Unsupported endpoint type {wanted}")
        return DescribeClusterResponse(
            error_code=ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else refused, error_message=message,
            endpoint_type=wanted, cluster_id="", controller_id=-1, brokers=[])
    host, port = state.address_of(ctx.listener)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=BROKERS,
        cluster_id=state.cluster_id, controller_id=state.node_id,
        brokers=[DescribeClusterBroker(broker_id=state.node_id, host=host, port=port, rack=None, is_fenced=False)],
        cluster_authorized_operations=CLUSTER_OPERATIONS if request.include_cluster_authorized_operations
        else UNSET_OPERATIONS)
