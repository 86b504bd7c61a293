"""Heartbeat (key 12), versions 0-4: a member says it is alive, and learns whether it must rejoin."""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import GROUP_DENIED, Op
from pybroker.broker.security.authorization_groups import whole_group
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse


@handler(ApiKey.HEARTBEAT, versions=(0, 4),
         authorize=whole_group(Op.READ, lambda r: HeartbeatResponse(error_code=GROUP_DENIED)))
def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    state = ctx.state
    code = state.groups.coordinator.heartbeat(request.group_id, request.generation_id, request.member_id,
                                              request.group_instance_id, state.clock_ms())
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)
