"""DescribeShareGroupOffsets (key 90), versions 0-1: share groups' start offsets (KIP-932).

Per group, per topic partition asked (or every one the group has state for, when the topics are null): the
share-partition's start offset (-1 for a partition the group never read) and, from v1, its lag. An unknown
group, or a group of another type, is GROUP_ID_NOT_FOUND; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.

Authorizes DESCRIBE on each GROUP (`broker/security/authorization_share_groups.py`) and DESCRIBE on each
TOPIC named (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.handlers.share_group_heartbeat import other_group_type
from pybroker.broker.security.authorization_share_groups import describe_share_group_offsets_rule
from pybroker.broker.security.authorizer import host_of
from pybroker.protocol.acl_codes import AclOperation, ResourceType
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)


def topic_permitted(ctx: RequestContext, operation: AclOperation, name: str) -> bool:
    """The principal may `operation` the topic `name` (always, without an authorizer)."""
    authorizer = ctx.state.authorizer
    return authorizer is None or bool(authorizer.allowed(ctx.principal, host_of(ctx.peer), operation,
                                                         ResourceType.TOPIC, name))


def _group(ctx: RequestContext, asked: DescribeShareGroupOffsetsRequestGroup) -> DescribeShareGroupOffsetsResponseGroup:
    shares = ctx.state.shares
    answer = DescribeShareGroupOffsetsResponseGroup(group_id=asked.group_id)
    if shares.loading:
        answer.error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return answer
    if shares.groups.get(asked.group_id) is None or other_group_type(ctx, asked.group_id):
        answer.error_code = ErrorCode.GROUP_ID_NOT_FOUND
        answer.error_message = f"Group {asked.group_id} not found."
        return answer
    held = shares.group_partitions(asked.group_id)
    wanted: list[tuple[str, list[int]]]
    if asked.topics is None:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for topic_id, partition in sorted(held, key=lambda tp: (str(tp[0]), tp[1])):
            by_topic.setdefault(topic_id, []).append(partition)
        wanted = []
        for topic_id, partitions in by_topic.items():
            info = ctx.state.logs.topic_by_id(topic_id)
            if info is not None:
                wanted.append((info.name, partitions))
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in asked.topics]
    for name, partitions in wanted:
        info = ctx.state.logs.topics().get(name)
        topic = DescribeShareGroupOffsetsResponseTopic(topic_name=name,
                                                       topic_id=info.topic_id if info else uuid.UUID(int=0))
        answer.topics.append(topic)
        permitted = topic_permitted(ctx, AclOperation.DESCRIBE, name)
        for partition in partitions:
            row = DescribeShareGroupOffsetsResponsePartition(partition_index=partition, start_offset=-1,
                                                            leader_epoch=-1, lag=-1)
            topic.partitions.append(row)
            if not permitted:
                row.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if info is None or not 0 <= partition < info.num_partitions:
                row.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            share = held.get((info.topic_id, partition))
            if share is None:
                continue
            row.start_offset, row.leader_epoch = share.start_offset, 0
            target, _ = ctx.state.replicas.resolve(name, partition)
            if target is not None:
                row.lag = shares.lag(share, target.positions()[1])
    return answer


@handler(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, versions=(0, 1), authorize=describe_share_group_offsets_rule)
def handle_describe_share_group_offsets(ctx: RequestContext, request: DescribeShareGroupOffsetsRequest) -> Any:
    return DescribeShareGroupOffsetsResponse(groups=[_group(ctx, g) for g in request.groups])
