"""DescribeProducers (key 61), version 0: the active producers of each partition, from its producer state.

Per producer: id, epoch, last sequence, last timestamp, the coordinator epoch of its last marker (-1 before
any) and the first offset of its open transaction (-1 when none); what kafka-transactions.sh's
`describe-producers`, `find-hanging` and `abort --start-offset` read. A partition we do not have answers
UNKNOWN_TOPIC_OR_PARTITION, or NOT_LEADER_OR_FOLLOWER when the topic has it but this broker holds no log
for it (Kafka's "in the metadata, not hosted here"); a log in an offline dir KAFKA_STORAGE_ERROR.

A partition named twice in a request is described once, and a topic named twice is one entry, so a
request cannot multiply the answer (each partition may hold thousands of producers).

Authorizes READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition), as Kafka does.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_txn import describe_producers_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)


def requested(request: DescribeProducersRequest) -> dict[str, list[int]]:
    """Each topic once, each of its partitions once, in the order first named."""
    wanted: dict[str, dict[int, None]] = {}
    for topic in request.topics:
        wanted.setdefault(topic.name, {}).update(dict.fromkeys(topic.partition_indexes))
    return {name: list(parts) for name, parts in wanted.items()}


def _describe(ctx: RequestContext, topic: str, partition: int) -> PartitionResponse:
    target, code = ctx.state.replicas.resolve(topic, partition)
    if target is None:
        info = ctx.state.topics.get(topic)
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and info is not None and 0 <= partition < info.num_partitions:
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return PartitionResponse(partition_index=partition, error_code=code)
    producers = [ProducerState(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                               last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                               coordinator_epoch=p.coordinator_epoch,
                               current_txn_start_offset=p.current_txn_start_offset)
                 for p in target.log.producer_state.describe()]
    return PartitionResponse(partition_index=partition, error_code=ErrorCode.NONE, active_producers=producers)


@handler(ApiKey.DESCRIBE_PRODUCERS, versions=(0, 0), authorize=describe_producers_rule)
def handle_describe_producers(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=name, partitions=[_describe(ctx, name, p) for p in partitions])
        for name, partitions in requested(request).items()])
