"""LeaveGroup (key 13), versions 0-5: members leave at once instead of timing out; v3+ batches members.

v0-2 name one member and carry its error at the top; v3+ answer per member (static members may leave
by instance id alone).
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import GROUP_DENIED, Op
from pybroker.broker.security.authorization_groups import whole_group
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse

FIRST_BATCHED_VERSION = 3


@handler(ApiKey.LEAVE_GROUP, versions=(0, 5),
         authorize=whole_group(Op.READ, lambda r: LeaveGroupResponse(error_code=GROUP_DENIED)))
def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    state = ctx.state
    coordinator = state.groups.coordinator
    if ctx.api_version < FIRST_BATCHED_VERSION:
        _, codes = coordinator.leave(request.group_id, [(request.member_id, None)], state.clock_ms())
        return LeaveGroupResponse(throttle_time_ms=0, error_code=codes[0])
    leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    error, codes = coordinator.leave(request.group_id, leaving, state.clock_ms())
    members = [] if error else [
        MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code)
        for (member_id, instance_id), code in zip(leaving, codes, strict=True)]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=members)
