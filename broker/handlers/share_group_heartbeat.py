"""ShareGroupHeartbeat (key 76), version 1: share group membership (KIP-932).

A member joins (epoch 0, with its own member id and its subscription), heartbeats at
`group.share.heartbeat.interval.ms`, and leaves (epoch -1). Leaving releases nothing by itself: a client
leaves and then sends its last acknowledgements with its share session's final epoch (librdkafka's close
does it in that order), which releases what it still holds; a member that vanishes without that is
released when its session times out (`group.share.session.timeout.ms`), or, having left, a lock duration
later (`ShareService.member_departed`). What the heartbeat changed of the membership is written to
`__consumer_offsets` (Kafka's share group records, `broker/share/share_group_log.py`) and fsynced before
the answer, which carries the member's epoch and, when it changed, its assignment (Kafka's simple
assignor, `broker/share/share_assignor.py`). A group id already used by a
classic or consumer group is GROUP_ID_NOT_FOUND, as Kafka answers.

Authorizes READ on the GROUP and DESCRIBE on every subscribed TOPIC
(`broker/security/authorization_share_groups.py`).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, waiting
from pybroker.broker.groups.deferred_responses import client_host
from pybroker.broker.security.authorization_share_groups import share_group_heartbeat_rule
from pybroker.broker.share.share_groups import HeartbeatOutcome
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.share_group_heartbeat import (
    ShareAssignedTopicPartitions,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareHeartbeatAssignment,
)


def other_group_type(ctx: RequestContext, group_id: str) -> bool:
    """Is `group_id` taken by a classic or consumer group?"""
    group = ctx.state.groups.coordinator.groups.get(group_id)
    return group is not None and group.state_name != "Dead"


@handler(ApiKey.SHARE_GROUP_HEARTBEAT, versions=(1, 1), authorize=share_group_heartbeat_rule)
def handle_share_group_heartbeat(ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> Any:
    shares = ctx.state.shares
    if shares.loading or shares.group_loading(request.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                           member_epoch=request.member_epoch)
    if other_group_type(ctx, request.group_id):
        return ShareGroupHeartbeatResponse(
            error_code=ErrorCode.GROUP_ID_NOT_FOUND, member_epoch=request.member_epoch,
            error_message=f"Group {request.group_id} is not a share group.")
    outcome = shares.groups.heartbeat(
        request.group_id, request.member_id, request.member_epoch, request.rack_id, request.subscribed_topic_names,
        ctx.client_id or "", client_host(ctx.peer), ctx.state.clock_ms())
    if outcome.departed is not None:
        shares.member_departed(request.group_id, outcome.departed, ctx.state.clock_ms())
    shares.scheduled()
    if outcome.error != ErrorCode.NONE:
        return _response(request, outcome)
    return waiting(_written(ctx, request, outcome))


async def _written(ctx: RequestContext, request: ShareGroupHeartbeatRequest,
                   outcome: HeartbeatOutcome) -> ShareGroupHeartbeatResponse:
    """The answer, once what the heartbeat changed is fsynced in `__consumer_offsets`."""
    code = await ctx.state.shares.write_group(request.group_id)
    if code is not ErrorCode.NONE:
        return ShareGroupHeartbeatResponse(error_code=code, member_epoch=request.member_epoch)
    return _response(request, outcome)


def _response(request: ShareGroupHeartbeatRequest, outcome: HeartbeatOutcome) -> ShareGroupHeartbeatResponse:
    assignment = None
    if outcome.assignment is not None:
        assignment = ShareHeartbeatAssignment(topic_partitions=[
            ShareAssignedTopicPartitions(topic_id=topic, partitions=sorted(parts))
            for topic, parts in sorted(outcome.assignment.items(), key=lambda item: str(item[0]))])
    # Kafka answers a malformed heartbeat INVALID_REQUEST without a message (its error response of the exception)
    message = None if outcome.error == ErrorCode.INVALID_REQUEST else outcome.message
    return ShareGroupHeartbeatResponse(
        error_code=outcome.error, error_message=message, member_id=outcome.member_id,
        member_epoch=outcome.member_epoch if outcome.error == ErrorCode.NONE else request.member_epoch,
        heartbeat_interval_ms=outcome.heartbeat_interval_ms, assignment=assignment)
