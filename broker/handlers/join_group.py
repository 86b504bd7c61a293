"""JoinGroup (key 11), versions 0-9: a member asks to be part of the group's next generation.

The answer waits until the join phase ends (every member rejoined, or the rebalance timeout passed);
v4+ first hands a new member its id (MEMBER_ID_REQUIRED). v0 has no rebalance timeout: the session
timeout stands in for it, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.deferred_responses import answer, client_host
from pybroker.broker.groups.outcomes import JoinOutcome, JoinRequest
from pybroker.broker.security.authorization_check import GROUP_DENIED, Op
from pybroker.broker.security.authorization_groups import whole_group
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember

FIRST_MEMBER_ID_REQUIRED_VERSION = 4
FIRST_NULLABLE_PROTOCOL_VERSION = 7


def _refused(request: JoinGroupRequest) -> JoinGroupResponse:
    """Without READ on the group."""
    return JoinGroupResponse(error_code=GROUP_DENIED, generation_id=-1, member_id="")


@handler(ApiKey.JOIN_GROUP, versions=(0, 9), authorize=whole_group(Op.READ, _refused))
def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> Any:
    rebalance_timeout = request.rebalance_timeout_ms
    if rebalance_timeout < 0:
        rebalance_timeout = request.session_timeout_ms
    join = JoinRequest(
        group_id=request.group_id, member_id=request.member_id, group_instance_id=request.group_instance_id,
        client_id=ctx.client_id or "", client_host=client_host(ctx.peer),
        session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=rebalance_timeout,
        protocol_type=request.protocol_type, protocols=[(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=ctx.api_version >= FIRST_MEMBER_ID_REQUIRED_VERSION)
    version = ctx.api_version
    state = ctx.state

    def build(outcome: JoinOutcome) -> JoinGroupResponse:
        protocol_name = outcome.protocol_name
        if protocol_name is None and version < FIRST_NULLABLE_PROTOCOL_VERSION:
            protocol_name = ""
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=outcome.error, generation_id=outcome.generation,
            protocol_type=outcome.protocol_type, protocol_name=protocol_name, leader=outcome.leader,
            skip_assignment=outcome.skip_assignment, member_id=outcome.member_id,
            members=[JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                             metadata=m.metadata) for m in outcome.members])

    return answer(lambda respond: state.groups.coordinator.join(join, state.clock_ms(), respond), build)
