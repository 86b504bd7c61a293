"""ElectLeaders (key 43), versions 0-2: every partition already has its one possible leader.

A single node is the only replica of every partition, and always its leader, so each named partition
is answered ELECTION_NOT_NEEDED for a preferred (0) or unclean (1) election alike, as Kafka's
controller answers a partition whose leader is already the preferred replica. Unknown topics and
partitions are UNKNOWN_TOPIC_OR_PARTITION with Kafka's message. A null partition list asks for every
partition: as in Kafka, each topic is listed and the partitions that needed no election are left out
(so here every topic's list is empty). v0 has no election type (preferred); an unknown type is an
INVALID_REQUEST for the whole request (top-level from v1, and on each partition named).

Hostile input: each topic is looked up once; partitions named are answered one for one, bounded by
the request's size (and `max.partitions.per.request` in all: past it the request is refused whole
with POLICY_VIOLATION before any lookup).

Authorizes: ALTER on the cluster; without it every partition named (and, v1+, the top level) is
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import cluster_only, elect_leaders_refusal
from pybroker.broker.topics import EXCESSIVE_BATCH_MESSAGE
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

ELECTION_TYPES = (0, 1)  # preferred, unclean


def refuse_all(request: ElectLeadersRequest, code: int, message: str | None) -> ElectLeadersResponse:
    """Every partition named, and the top level, answered `code` (no partitions named: only the top level)."""
    return ElectLeadersResponse(throttle_time_ms=0, error_code=code, replica_election_results=[
        ReplicaElectionResult(topic=t.topic, partition_result=[
            PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
        for t in request.topic_partitions or []])


@handler(ApiKey.ELECT_LEADERS, versions=(0, 2), authorize=cluster_only(Op.ALTER, elect_leaders_refusal))
def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    state = ctx.state
    if request.election_type not in ELECTION_TYPES:
        return refuse_all(request, ErrorCode.INVALID_REQUEST, f"Unknown election type {request.election_type}")
    if request.topic_partitions is None:  # every partition: those needing no election are not listed
        return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[
            ReplicaElectionResult(topic=name, partition_result=[]) for name in sorted(state.logs.topics())])
    if state.topics.excessive(sum(len(t.partitions) for t in request.topic_partitions)):
        return refuse_all(request, ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)
    results = []
    for topic in request.topic_partitions:
        info = state.topics.get(topic.topic)
        partitions = []
        for index in topic.partitions:
            if info is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic.topic}"
            elif not 0 <= index < info.num_partitions:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic.topic}-{index}"
            else:
                # the code's own text, which Kafka 4.4's controller sends with it
                code, message = ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
            partitions.append(PartitionResult(partition_id=index, error_code=code, error_message=message))
        results.append(ReplicaElectionResult(topic=topic.topic, partition_result=partitions))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)
