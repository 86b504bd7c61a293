"""ListPartitionReassignments (key 46), version 0: none is ever in progress on a single node.

Partitions never move (see AlterPartitionReassignments), so the answer lists no reassignment for any
topic, named or not (a null list asks for every one), as Kafka lists only ongoing ones.

Authorizes: DESCRIBE on the cluster; refused whole with a top-level CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import cluster_only, top_level_refusal
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, versions=(0, 0),
         authorize=cluster_only(Op.DESCRIBE, top_level_refusal(ApiKey.LIST_PARTITION_REASSIGNMENTS)))
def handle_list_partition_reassignments(
        ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                              topics=[])
