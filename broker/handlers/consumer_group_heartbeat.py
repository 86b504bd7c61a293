"""ConsumerGroupHeartbeat (key 68), versions 0-1: the consumer group protocol (KIP-848).

A member joins (epoch 0), heartbeats at `group.consumer.heartbeat.interval.ms` with its epoch and what
it owns, and leaves (epoch -1; -2: a static member that will come back). The coordinator computes the
target assignment with a server-side assignor and answers the member's epoch and, when it changed, its
assignment; partitions move only after their previous owner acknowledged their revocation. The answer
waits until what the heartbeat changed is durable in `__consumer_offsets`. v1 adds the subscription regex.

Authorizes READ on the GROUP (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed TOPIC
(TOPIC_AUTHORIZATION_FAILED), as Kafka does; a subscription regex matches only the topics the member's
principal may DESCRIBE (Kafka 4's rule).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.consumer_group import Assignment
from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat, ConsumerHeartbeatOutcome
from pybroker.broker.groups.deferred_responses import answer, client_host
from pybroker.broker.groups.topic_regex import TopicFilter
from pybroker.broker.security.authorization_consumer_groups import consumer_group_heartbeat_rule
from pybroker.broker.security.authorizer import host_of
from pybroker.protocol.acl_codes import AclOperation, ResourceType
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.consumer_group_heartbeat import (
    AssignedTopicPartitions,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
)


def owned_of(request: ConsumerGroupHeartbeatRequest) -> Assignment | None:
    if request.topic_partitions is None:
        return None
    owned: dict[Any, frozenset[int]] = {}
    for tp in request.topic_partitions:
        owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return owned


def _response(outcome: ConsumerHeartbeatOutcome) -> ConsumerGroupHeartbeatResponse:
    assignment = None
    if outcome.assignment is not None:
        assignment = HeartbeatAssignment(topic_partitions=[
            AssignedTopicPartitions(topic_id=topic, partitions=sorted(parts))
            for topic, parts in sorted(outcome.assignment.items(), key=lambda item: str(item[0]))])
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=outcome.error, error_message=outcome.message, member_id=outcome.member_id,
        member_epoch=outcome.member_epoch, heartbeat_interval_ms=outcome.heartbeat_interval_ms,
        assignment=assignment)


def _topic_filter(ctx: RequestContext) -> TopicFilter | None:
    """The topics this member's regex may match: those its principal may DESCRIBE (none filtered without
    an authorizer)."""
    authorizer = ctx.state.authorizer
    if authorizer is None:
        return None
    principal, host = ctx.principal, host_of(ctx.peer)

    def allowed(topic: str) -> bool:
        return bool(authorizer.allowed(principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC, topic,
                                       log_denial=False))

    return TopicFilter((principal, host), allowed)


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT, versions=(0, 1), authorize=consumer_group_heartbeat_rule)
def handle_consumer_group_heartbeat(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> Any:
    state = ctx.state
    heartbeat = ConsumerHeartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names, subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor, owned=owned_of(request), client_id=ctx.client_id or "",
        client_host=client_host(ctx.peer), topic_filter=_topic_filter(ctx))
    return answer(lambda respond: state.groups.coordinator.consumer_heartbeat(heartbeat, state.clock_ms(), respond),
                  _response)
