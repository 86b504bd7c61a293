"""DescribeGroups (key 15), versions 0-6: a group's state, protocol and members.

Member metadata and assignments are shown only while the group is Stable (in any other state they are
about to change), as Kafka does. An unknown group is "Dead" with no error before v6, and
GROUP_ID_NOT_FOUND from v6. A group of the consumer protocol (KIP-848) is described by
ConsumerGroupDescribe, a streams group (KIP-1071) by StreamsGroupDescribe; here either is answered as
Kafka 4 answers it: "not a classic group" (GROUP_ID_NOT_FOUND from v6, Dead before).
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.state_machine import GroupState
from pybroker.broker.security.authorization_groups import describe_groups_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)

FIRST_NOT_FOUND_VERSION = 6
#: READ, DELETE and DESCRIBE (Kafka's AclOperation codes 3, 6, 8) as a bit field: all of them, no ACLs here
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
NOT_REQUESTED = -(2**31)


def _describe(ctx: RequestContext, group_id: str, operations: int) -> DescribedGroup:
    error, group = ctx.state.groups.coordinator.describe(group_id)
    if group is None or group.consumer is not None or group.streams is not None:
        if error is ErrorCode.NONE and ctx.api_version >= FIRST_NOT_FOUND_VERSION:
            message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a classic group."
            return DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, group_id=group_id,
                                  error_message=message, group_state=GroupState.DEAD.value,
                                  authorized_operations=operations)
        return DescribedGroup(error_code=error, group_id=group_id, group_state=GroupState.DEAD.value,
                              authorized_operations=operations)
    stable = group.state is GroupState.STABLE
    members = [DescribedGroupMember(
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
        client_host=m.client_host,
        member_metadata=m.metadata_for(group.protocol_name) if stable else b"",
        member_assignment=m.assignment if stable else b"")
        for m in group.members.values()]
    return DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value,
                          protocol_type=group.protocol_type or "",
                          protocol_data=(group.protocol_name or "") if stable else "",
                          members=members, authorized_operations=operations)


@handler(ApiKey.DESCRIBE_GROUPS, versions=(0, 6), authorize=describe_groups_rule)
def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    operations = GROUP_OPERATIONS if request.include_authorized_operations else NOT_REQUESTED
    return DescribeGroupsResponse(throttle_time_ms=0,
                                  groups=[_describe(ctx, group_id, operations) for group_id in request.groups])
