"""AlterPartitionReassignments (key 45), versions 0-1: nothing can move, so only a no-op succeeds.

A single node has nowhere to move a partition to. A reassignment to exactly this node is what the
partition already has: a no-op, answered NONE. Anything else is refused per partition with Kafka's
controller's words: an empty replica list, a broker that is not registered (any id but ours), or a
broker named twice are INVALID_REPLICA_ASSIGNMENT; with v1's `allow_replication_factor_change` false
a list of another length is INVALID_REPLICATION_FACTOR; cancelling (a null list) finds nothing to
cancel: NO_REASSIGNMENT_IN_PROGRESS. Unknown topics and partitions are UNKNOWN_TOPIC_OR_PARTITION.

Hostile input: the partitions named are answered one for one, in all at most `max.partitions.per.request`
(past it the request is refused whole, POLICY_VIOLATION, before any lookup); replica lists are
checked without building anything from them.

Authorizes: ALTER on the cluster; refused whole with a top-level CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import cluster_only, top_level_refusal
from pybroker.broker.topics import EXCESSIVE_BATCH_MESSAGE
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

Outcome = tuple[int, str | None]


def _check_replicas(replicas: list[int], node: int, allow_rf_change: bool) -> Outcome:
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for broker in replicas:
        if broker != node:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker}, but no such broker is registered.")
        if broker in seen:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker} more than once.")
        seen.add(broker)
    if len(replicas) != 1 and not allow_rf_change:  # unreachable today: kept for a second broker
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from 1 to {len(replicas)} but option "
                "allowReplicationFactorChange is false.")
    return ErrorCode.NONE, None


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, versions=(0, 1),
         authorize=cluster_only(Op.ALTER, top_level_refusal(ApiKey.ALTER_PARTITION_REASSIGNMENTS)))
def handle_alter_partition_reassignments(
        ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    state = ctx.state
    allow = request.allow_replication_factor_change
    if state.topics.excessive(sum(len(t.partitions) for t in request.topics)):
        return AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=allow, error_code=ErrorCode.POLICY_VIOLATION,
            error_message=EXCESSIVE_BATCH_MESSAGE, responses=[])
    responses = []
    for topic in request.topics:
        info = state.topics.get(topic.name)
        partitions = []
        for p in topic.partitions:
            code: int
            message: str | None
            if info is None or not 0 <= p.partition_index < info.num_partitions:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            elif p.replicas is None:
                code, message = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                 f"No ongoing reassignment for partition {topic.name}-{p.partition_index}.")
            else:
                code, message = _check_replicas(p.replicas, state.node_id, allow)
            partitions.append(ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                                            error_message=message))
        responses.append(ReassignableTopicResponse(name=topic.name, partitions=partitions))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, allow_replication_factor_change=allow,
                                               error_code=ErrorCode.NONE, error_message=None, responses=responses)
