"""ShareAcknowledge (key 79), versions 1-2: acknowledgements without a fetch (KIP-932).

The member's share session must exist and the epoch be the next one (epoch 0 is
INVALID_SHARE_SESSION_EPOCH: this API never opens a session); epoch -1 acknowledges and closes the
session, releasing what the member still held on it. Each partition's outcome is its error code
(INVALID_RECORD_STATE for records the member does not hold). The answer goes out only once the changed
share-partitions are fsynced in `__share_group_state`. v2 (KIP-1222) answers the acquisition lock's
duration, which a renew acknowledgement restarts.

Authorizes READ on the GROUP (the whole request) and READ on each TOPIC (TOPIC_AUTHORIZATION_FAILED for
its partitions).
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, waiting
from pybroker.broker.handlers.share_fetch import topic_allowed
from pybroker.broker.security.authorization_share_groups import share_acknowledge_rule
from pybroker.broker.share.share_state_topic import ShareKey
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.share_acknowledge import (
    ShareAcknowledgeLeaderIdAndEpoch,
    ShareAcknowledgePartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)


@handler(ApiKey.SHARE_ACKNOWLEDGE, versions=(1, 2), authorize=share_acknowledge_rule)
def handle_share_acknowledge(ctx: RequestContext, request: ShareAcknowledgeRequest) -> Any:
    shares = ctx.state.shares
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not group_id or not member_id:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_REQUEST)  # no message, as Kafka
    if shares.loading:
        return ShareAcknowledgeResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    plan = shares.sessions.acknowledge((group_id, member_id), request.share_session_epoch)
    if plan.error or plan.session is None:
        return ShareAcknowledgeResponse(error_code=plan.error)
    now = ctx.state.clock_ms()
    allowed = topic_allowed(ctx)
    changed: set[ShareKey] = set()
    codes: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for topic in request.topics:
        for part in topic.partitions:
            tp = (topic.topic_id, part.partition_index)
            if not allowed(topic.topic_id):
                codes[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            key = (group_id, topic.topic_id, part.partition_index)
            codes[tp] = shares.acknowledge(key, member_id, [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                                                            for b in part.acknowledgement_batches], now)
            changed.add(key)
    if plan.closing:
        changed.update(shares.release_member(group_id, member_id, [(group_id, *tp) for tp in plan.session.partitions]))
    shares.scheduled()
    return waiting(_answer(ctx, group_id, codes, changed))


async def _answer(ctx: RequestContext, group_id: str, codes: dict[tuple[uuid.UUID, int], ErrorCode],
                  changed: set[ShareKey]) -> ShareAcknowledgeResponse:
    shares = ctx.state.shares
    stored = await shares.persist(changed)
    by_topic: dict[uuid.UUID, list[ShareAcknowledgePartitionData]] = {}
    for (topic_id, partition), code in codes.items():
        by_topic.setdefault(topic_id, []).append(ShareAcknowledgePartitionData(
            partition_index=partition, error_code=stored if code is ErrorCode.NONE else code,
            current_leader=ShareAcknowledgeLeaderIdAndEpoch(leader_id=ctx.state.node_id, leader_epoch=0)))
    return ShareAcknowledgeResponse(
        error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=shares.lock_duration_ms(group_id),
        responses=[ShareAcknowledgeTopicResponse(topic_id=t, partitions=parts) for t, parts in by_topic.items()])
