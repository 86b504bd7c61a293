"""AlterShareGroupOffsets (key 91), version 0: set share-partitions' start offsets (KIP-932).

`kafka-share-groups --reset-offsets`: each named partition starts again at the offset given (kept within
the log), with nothing in flight. The group must have no members (NON_EMPTY_GROUP); one that does not
exist is made, empty. The new state is fsynced in `__share_group_state` before the answer.

Authorizes READ on the GROUP (the whole request) and READ on each TOPIC (TOPIC_AUTHORIZATION_FAILED for
its partitions).
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, waiting
from pybroker.broker.handlers.describe_share_group_offsets import topic_permitted
from pybroker.broker.handlers.share_group_heartbeat import other_group_type
from pybroker.broker.security.authorization_share_groups import alter_share_group_offsets_rule
from pybroker.broker.share.share_state_topic import ShareKey
from pybroker.protocol.acl_codes import AclOperation
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)


@handler(ApiKey.ALTER_SHARE_GROUP_OFFSETS, versions=(0, 0), authorize=alter_share_group_offsets_rule)
def handle_alter_share_group_offsets(ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> Any:
    shares = ctx.state.shares
    if shares.loading:
        return AlterShareGroupOffsetsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    if not request.group_id:
        return AlterShareGroupOffsetsResponse(error_code=ErrorCode.INVALID_GROUP_ID,
                                              error_message="The group id must not be empty.")
    if other_group_type(ctx, request.group_id):
        return AlterShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                              error_message=f"Group {request.group_id} is not a share group.")
    group = shares.groups.get(request.group_id)
    if group is not None and group.members:
        return AlterShareGroupOffsetsResponse(error_code=ErrorCode.NON_EMPTY_GROUP,
                                              error_message="The group is not empty.")
    changed: list[ShareKey] = []
    topics: list[AlterShareGroupOffsetsResponseTopic] = []
    for asked in request.topics:
        info = ctx.state.logs.topics().get(asked.topic_name)
        topic = AlterShareGroupOffsetsResponseTopic(topic_name=asked.topic_name,
                                                    topic_id=info.topic_id if info else uuid.UUID(int=0))
        topics.append(topic)
        permitted = topic_permitted(ctx, AclOperation.READ, asked.topic_name)
        for part in asked.partitions:
            row = AlterShareGroupOffsetsResponsePartition(partition_index=part.partition_index)
            topic.partitions.append(row)
            target = ctx.state.replicas.resolve(asked.topic_name, part.partition_index)[0] if info else None
            if not permitted:
                row.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or target is None:
                row.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                _, high_watermark, _, log_start = target.positions()
                changed.append(shares.alter_offset(request.group_id, info.topic_id, part.partition_index,
                                                   part.start_offset, log_start, high_watermark))
    return waiting(_answer(ctx, request.group_id, changed, topics))


async def _answer(ctx: RequestContext, group_id: str, changed: list[ShareKey],
                  topics: list[AlterShareGroupOffsetsResponseTopic]) -> AlterShareGroupOffsetsResponse:
    code = await ctx.state.shares.persist(changed)
    if code is ErrorCode.NONE:  # a group made by the reset is written to __consumer_offsets too
        code = await ctx.state.shares.write_group(group_id)
    if code is not ErrorCode.NONE:
        for topic in topics:
            for row in topic.partitions:
                row.error_code = row.error_code or code
    return AlterShareGroupOffsetsResponse(responses=topics)
