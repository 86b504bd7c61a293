"""OffsetForLeaderEpoch (key 23), versions 0-4.

Clients use it after a leader change to detect log truncation. This broker has always led every
partition at epoch 0, so the end offset of epoch 0 (or of any later epoch asked about) is the log end.
An epoch above ours is answered with epoch -1 and offset -1 (UNDEFINED), as Kafka does; a stale
current_leader_epoch gets FENCED_LEADER_EPOCH and a newer one UNKNOWN_LEADER_EPOCH.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_topics import offset_for_leader_epoch_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)

LEADER_EPOCH = 0


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions=(0, 4), authorize=offset_for_leader_epoch_rule)
def handle_offset_for_leader_epoch(ctx: RequestContext,
                                   request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics: list[OffsetForLeaderTopicResult] = []
    for topic in request.topics:
        results: list[EpochEndOffset] = []
        topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=results))
        for part in topic.partitions:
            answer = EpochEndOffset(partition=part.partition, error_code=ErrorCode.NONE, leader_epoch=-1,
                                    end_offset=-1)
            results.append(answer)
            target, code = ctx.state.replicas.resolve(topic.topic, part.partition)
            current = part.current_leader_epoch
            if target is None:
                answer.error_code = code
            elif current > LEADER_EPOCH:
                answer.error_code = ErrorCode.UNKNOWN_LEADER_EPOCH
            elif 0 <= current < LEADER_EPOCH:
                answer.error_code = ErrorCode.FENCED_LEADER_EPOCH
            elif part.leader_epoch <= LEADER_EPOCH:
                answer.leader_epoch, answer.end_offset = LEADER_EPOCH, target.log.log_end_offset
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
