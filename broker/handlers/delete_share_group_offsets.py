"""DeleteShareGroupOffsets (key 92), version 0: forget a share group's state for whole topics (KIP-932).

`kafka-share-groups --delete-offsets`: the topics' share-partitions are tombstoned in `__share_group_state`
(fsynced before the answer); the next read starts as a new share-partition does. The group must exist
(GROUP_ID_NOT_FOUND) and have no members (NON_EMPTY_GROUP).

Authorizes DELETE on the GROUP (the whole request) and READ on each TOPIC (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, waiting
from pybroker.broker.handlers.describe_share_group_offsets import topic_permitted
from pybroker.broker.handlers.share_group_heartbeat import other_group_type
from pybroker.broker.security.authorization_share_groups import delete_share_group_offsets_rule
from pybroker.protocol.acl_codes import AclOperation
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)


@handler(ApiKey.DELETE_SHARE_GROUP_OFFSETS, versions=(0, 0), authorize=delete_share_group_offsets_rule)
def handle_delete_share_group_offsets(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> Any:
    shares = ctx.state.shares
    if shares.loading:
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    if not request.group_id:
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.INVALID_GROUP_ID,
                                               error_message="The group id must not be empty.")
    group = shares.groups.get(request.group_id)
    if group is None or other_group_type(ctx, request.group_id):
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                               error_message=f"Group {request.group_id} not found.")
    if group.members:
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.NON_EMPTY_GROUP,
                                               error_message="The group is not empty.")
    return waiting(_answer(ctx, request))


async def _answer(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    shares = ctx.state.shares
    responses = []
    for asked in request.topics:
        info = ctx.state.logs.topics().get(asked.topic_name)
        row = DeleteShareGroupOffsetsResponseTopic(topic_name=asked.topic_name,
                                                   topic_id=info.topic_id if info else uuid.UUID(int=0))
        responses.append(row)
        if not topic_permitted(ctx, AclOperation.READ, asked.topic_name):
            row.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            row.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            row.error_code = await shares.delete_offsets(request.group_id, info.topic_id)
    return DeleteShareGroupOffsetsResponse(responses=responses)
