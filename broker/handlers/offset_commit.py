"""OffsetCommit (key 8), versions 0-9: store a group's positions, answered once they are fsynced.

v0 commits outside group management; v1 may carry a commit time per partition; v2-4 a retention time
that fixes when the offsets expire; v6 adds leader epochs; v7 static membership; v9 the member epoch of a KIP-848 consumer group, whose
consumer-protocol members are answered UNSUPPORTED_VERSION below it (Kafka's rule). The answer lists the
partitions that do not exist first, then the committed ones, as Kafka's (it answers the unknown ones before
asking its coordinator, then merges the coordinator's answer in): topics with an unknown partition first.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.deferred_responses import answer
from pybroker.broker.groups.outcomes import CommitRequest, OffsetToCommit
from pybroker.broker.security.authorization_groups import offset_commit_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

RETENTION_VERSIONS = range(2, 5)
#: the expire time is stored as an int64: a retention reaching past it means "never" (Kafka's sum wraps)
LATEST_EXPIRY_MS = 2**63 - 1


@handler(ApiKey.OFFSET_COMMIT, versions=(0, 9), authorize=offset_commit_rule)
def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> Any:
    state = ctx.state
    now = state.clock_ms()
    expire = -1
    if ctx.api_version in RETENTION_VERSIONS and request.retention_time_ms >= 0:
        expire = min(now + request.retention_time_ms, LATEST_EXPIRY_MS)
    offsets = [OffsetToCommit(topic.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                              p.committed_metadata, p.commit_timestamp, expire)
               for topic in request.topics for p in topic.partitions]
    commit = CommitRequest(request.group_id, request.generation_id_or_member_epoch, request.member_id,
                           request.group_instance_id, offsets, ctx.api_version)

    def build(codes: dict[tuple[str, int], ErrorCode]) -> OffsetCommitResponse:
        def unknown(name: str, index: int) -> bool:
            return codes[(name, index)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        topics = sorted(request.topics, key=lambda t: not any(unknown(t.name, p.partition_index) for p in t.partitions))
        return OffsetCommitResponse(throttle_time_ms=0, topics=[
            OffsetCommitResponseTopic(name=topic.name, partitions=[
                OffsetCommitResponsePartition(partition_index=p.partition_index,
                                              error_code=codes[(topic.name, p.partition_index)])
                for p in sorted(topic.partitions, key=lambda p: not unknown(topic.name, p.partition_index))])
            for topic in topics])

    return answer(lambda respond: state.groups.coordinator.commit_offsets(commit, now, respond), build)
