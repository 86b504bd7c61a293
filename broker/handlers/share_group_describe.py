"""ShareGroupDescribe (key 77), version 1: share groups with their members and assignments (KIP-932).

A group that does not exist, or is a classic or consumer group, is GROUP_ID_NOT_FOUND, as Kafka answers.
The assignor is named `simple`, Kafka's share assignor. Authorizes DESCRIBE on each GROUP
(`broker/security/authorization_share_groups.py`).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.handlers.share_group_heartbeat import other_group_type
from pybroker.broker.security.authorization_share_groups import share_group_describe_rule
from pybroker.broker.share.share_groups import ShareGroup
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.share_group_describe import (
    ShareDescribedAssignment,
    ShareDescribedGroup,
    ShareDescribedMember,
    ShareDescribedTopicPartitions,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

ASSIGNOR = "simple"


def _described(ctx: RequestContext, group: ShareGroup) -> ShareDescribedGroup:
    logs = ctx.state.logs
    members = []
    for member in group.members.values():
        parts = []
        for topic_id, partitions in sorted(member.assignment.items(), key=lambda item: str(item[0])):
            info = logs.topic_by_id(topic_id)
            parts.append(ShareDescribedTopicPartitions(topic_id=topic_id, topic_name=info.name if info else "",
                                                       partitions=sorted(partitions)))
        members.append(ShareDescribedMember(
            member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
            client_id=member.client_id, client_host=member.client_host,
            subscribed_topic_names=list(member.subscribed),
            assignment=ShareDescribedAssignment(topic_partitions=parts)))
    return ShareDescribedGroup(group_id=group.group_id, group_state=group.state, group_epoch=group.epoch,
                               assignment_epoch=group.assignment_epoch, assignor_name=ASSIGNOR, members=members)


@handler(ApiKey.SHARE_GROUP_DESCRIBE, versions=(1, 1), authorize=share_group_describe_rule)
def handle_share_group_describe(ctx: RequestContext, request: ShareGroupDescribeRequest) -> Any:
    shares = ctx.state.shares
    groups: list[ShareDescribedGroup] = []
    for group_id in request.group_ids:
        group = shares.groups.get(group_id)
        if shares.loading or shares.group_loading(group_id):
            groups.append(ShareDescribedGroup(group_id=group_id, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        elif group is None or other_group_type(ctx, group_id):
            groups.append(ShareDescribedGroup(
                group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} is not a share group." if group is None and
                other_group_type(ctx, group_id) else f"Group {group_id} not found."))
        else:
            groups.append(_described(ctx, group))
    return ShareGroupDescribeResponse(groups=groups)
