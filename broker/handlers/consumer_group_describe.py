"""ConsumerGroupDescribe (key 69), versions 0-1: consumer-protocol groups as their coordinator holds them.

Per group: state, group epoch, assignment epoch, the assignor of the last target, and per member its
epoch, subscription, current assignment and target assignment (topic ids and names). v1 adds each
member's type (1: consumer protocol). A group that does not exist is GROUP_ID_NOT_FOUND; a classic group
is GROUP_ID_NOT_FOUND too ("not a consumer group"), as in Kafka.

Authorizes DESCRIBE on each GROUP (GROUP_AUTHORIZATION_FAILED per group) and DESCRIBE on every TOPIC of its
members' assignments and targets (TOPIC_AUTHORIZATION_FAILED for that group, its members hidden), as Kafka does
(`security/authorization_consumer_groups.py`).
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.consumer_group import Assignment
from pybroker.broker.security.authorization_consumer_groups import consumer_group_describe_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.consumer_group_describe import (
    ConsumerDescribedGroup,
    ConsumerDescribedMember,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedTopicPartitions,
    MemberAssignment,
)

#: READ, DELETE and DESCRIBE (Kafka's AclOperation codes 3, 6, 8): all of them when no authorizer runs
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
NOT_REQUESTED = -(2**31)
CONSUMER_MEMBER_TYPE = 1


def _assignment(ctx: RequestContext, assignment: Assignment) -> MemberAssignment:
    logs = ctx.state.logs
    parts = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0])):
        info = logs.topic_by_id(topic_id)
        parts.append(DescribedTopicPartitions(topic_id=topic_id, topic_name=info.name if info else "",
                                              partitions=sorted(partitions)))
    return MemberAssignment(topic_partitions=parts)


def _describe(ctx: RequestContext, group_id: str, operations: int) -> ConsumerDescribedGroup:
    error, group = ctx.state.groups.coordinator.describe(group_id)
    if error is not ErrorCode.NONE:
        return ConsumerDescribedGroup(error_code=error, group_id=group_id, authorized_operations=operations)
    if group is None or group.consumer is None:
        message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a consumer group."
        return ConsumerDescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message,
                                      group_id=group_id, authorized_operations=operations)
    data = group.consumer
    members = [ConsumerDescribedMember(
        member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
        client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex, assignment=_assignment(ctx, m.assigned),
        target_assignment=_assignment(ctx, data.targets.get(m.member_id, {})), member_type=CONSUMER_MEMBER_TYPE)
        for m in data.members.values()]
    return ConsumerDescribedGroup(
        error_code=ErrorCode.NONE, group_id=group_id, group_state=data.state.value, group_epoch=data.group_epoch,
        assignment_epoch=data.assignment_epoch, assignor_name=data.assignor, members=members,
        authorized_operations=operations)


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE, versions=(0, 1), authorize=consumer_group_describe_rule)
def handle_consumer_group_describe(ctx: RequestContext, request: ConsumerGroupDescribeRequest
                                   ) -> ConsumerGroupDescribeResponse:
    operations = GROUP_OPERATIONS if request.include_authorized_operations else NOT_REQUESTED
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
        _describe(ctx, group_id, operations) for group_id in request.group_ids])
