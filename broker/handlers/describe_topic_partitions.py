"""DescribeTopicPartitions (key 75), version 0: Metadata's topic answer, one page at a time (KIP-966).

Topics are walked in name order from the request's `cursor` (a topic name and the partition index to
start at); an empty topic list means every topic. Each answer lists at most
min(`response_partition_limit`, `max.request.partition.size.limit`) partitions; when it stops early,
`next_cursor` names the first partition left out (a later topic's partition 0 when a topic ended
exactly at the limit), else it is null. As in Kafka: a named topic that does not exist is answered
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name) without using any of the
limit; a cursor whose topic is not among the named topics is refused (INVALID_REQUEST); a limit of 0
or less lists nothing. Partitions are this node's: leader, replica and ISR are this node, the leader
epoch 0, no eligible leader replicas (empty ELR lists, as Kafka sends them with ELR off: the Java admin
client's describeTopics reads both lists without a null check, so null ones broke kafka-topics
--describe); a partition on a failed log dir has no leader and lists this node as offline, as Metadata does.

Hostile input: the topic list is de-duplicated and each topic is looked up once; the work is bounded
by the page limit, the names by the request's size.

Authorizes: DESCRIBE on each topic. A named topic denied is answered TOPIC_AUTHORIZATION_FAILED with
no id; a denied topic is simply left out of an every-topic listing. `topic_authorized_operations` is
filled in for every listed topic (the authorization table does it; without an authorizer, every
topic operation).
"""

from __future__ import annotations

import uuid

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.handlers.metadata import TOPIC_OPERATIONS
from pybroker.broker.security.authorization_topics import describe_topic_partitions_rule
from pybroker.broker.topics import INTERNAL_TOPICS, TopicError, check_topic_name
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponseCursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from pybroker.storage.log_manager import TopicInfo

ZERO_UUID = uuid.UUID(int=0)


def _partitions(ctx: RequestContext, info: TopicInfo, start: int, stop: int) -> list[DescribeTopicPartitionsResponsePartition]:
    node = ctx.state.node_id
    logs = ctx.state.logs
    offline = logs.offline_dirs
    out = []
    for index in range(start, stop):
        down = bool(offline) and logs.dir_of(info.name, index) in offline
        out.append(DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.NONE, partition_index=index, leader_id=-1 if down else node, leader_epoch=0,
            replica_nodes=[node], isr_nodes=[] if down else [node], eligible_leader_replicas=[],
            last_known_elr=[], offline_replicas=[node] if down else []))
    return out


def _missing(name: str) -> DescribeTopicPartitionsResponseTopic:
    try:
        check_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except TopicError:
        code = ErrorCode.INVALID_TOPIC_EXCEPTION
    return DescribeTopicPartitionsResponseTopic(error_code=code, name=name, topic_id=ZERO_UUID,
                                                is_internal=name in INTERNAL_TOPICS, partitions=[])


@handler(ApiKey.DESCRIBE_TOPIC_PARTITIONS, versions=(0, 0), authorize=describe_topic_partitions_rule)
def handle_describe_topic_partitions(ctx: RequestContext,
                                     request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    state = ctx.state
    every_topic = not request.topics
    cursor = request.cursor
    first = cursor.topic_name if cursor is not None else ""
    if every_topic:
        names = sorted(name for name in state.logs.topics() if name >= first)
    else:
        names = sorted({t.name for t in request.topics if t.name >= first})
        if cursor is not None and cursor.topic_name not in names:
            # Kafka: "topic list should contain the cursor topic"; every named topic gets the error
            return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
                DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=name,
                                                     topic_id=ZERO_UUID, partitions=[])
                for name in sorted({t.name for t in request.topics})])
    remaining = min(request.response_partition_limit, int(state.config.get("max.request.partition.size.limit")))
    response = DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=None)
    for name in names:
        if remaining <= 0:
            if remaining == 0:  # the previous topic ended exactly at the limit: this one is next
                response.next_cursor = DescribeTopicPartitionsResponseCursor(topic_name=name, partition_index=0)
            break
        info = state.topics.get(name)
        if info is None:
            if not every_topic:
                response.topics.append(_missing(name))
            continue
        start = max(0, cursor.partition_index) if cursor is not None and name == cursor.topic_name else 0
        stop = min(info.num_partitions, start + remaining)
        response.topics.append(DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=info.topic_id, is_internal=name in INTERNAL_TOPICS,
            partitions=_partitions(ctx, info, start, stop),
            topic_authorized_operations=TOPIC_OPERATIONS))
        if stop < info.num_partitions:
            response.next_cursor = DescribeTopicPartitionsResponseCursor(topic_name=name, partition_index=stop)
            break
        remaining -= max(0, stop - start)
    return response
