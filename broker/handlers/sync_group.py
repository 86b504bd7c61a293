"""SyncGroup (key 14), versions 0-5: the leader hands in the assignment; every member gets its share.

Followers wait until the leader's assignment is durable in `__consumer_offsets`; v5 names the protocol
so a member can check it is the one it expects; a v5+ request that leaves the protocol type or name null is
answered INCONSISTENT_GROUP_PROTOCOL before anything else, as Kafka's request handler does.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.deferred_responses import answer
from pybroker.broker.groups.outcomes import SyncOutcome, SyncRequest
from pybroker.broker.security.authorization_check import GROUP_DENIED, Op
from pybroker.broker.security.authorization_groups import whole_group
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

FIRST_NAMED_PROTOCOL_VERSION = 5


@handler(ApiKey.SYNC_GROUP, versions=(0, 5),
         authorize=whole_group(Op.READ, lambda r: SyncGroupResponse(error_code=GROUP_DENIED)))
def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> Any:
    if ctx.api_version >= FIRST_NAMED_PROTOCOL_VERSION and (request.protocol_type is None or
                                                            request.protocol_name is None):
        return SyncGroupResponse(throttle_time_ms=0, error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    sync = SyncRequest(
        group_id=request.group_id, generation=request.generation_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id, protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id: a.assignment for a in request.assignments})
    state = ctx.state

    def build(outcome: SyncOutcome) -> SyncGroupResponse:
        return SyncGroupResponse(throttle_time_ms=0, error_code=outcome.error, protocol_type=outcome.protocol_type,
                                 protocol_name=outcome.protocol_name, assignment=outcome.assignment)

    return answer(lambda respond: state.groups.coordinator.sync(sync, state.clock_ms(), respond), build)
