"""StreamsGroupHeartbeat (key 88), versions 0-1: the Streams rebalance protocol (KIP-1071).

A Kafka Streams member joins (epoch 0, with its topology), heartbeats with its epoch and the tasks it owns,
and leaves (epoch -1; -2: a static member that will come back). The coordinator configures the topology
against the topics, creates missing repartition and changelog topics, computes target task assignments
(`broker/streams_groups/`), and answers the member's epoch, its tasks when they changed, and the group's
statuses. The answer waits until what the heartbeat changed is durable in `__consumer_offsets`.

Version 1 (Kafka 4.4, KIP-1331) answers the acceptable recovery lag as an int64 and TopologyDescriptionRequired,
always false here: no topology description is stored (StreamsGroupTopologyDescriptionUpdate is refused as
Kafka 4.4 refuses it without a description plugin), so no member is asked for one.

Authorizes READ on the GROUP (GROUP_AUTHORIZATION_FAILED), DESCRIBE on every topic the topology names
(TOPIC_AUTHORIZATION_FAILED), and CREATE (on the CLUSTER, or on each topic) for the internal topics the
broker creates for it (TOPIC_AUTHORIZATION_FAILED: Kafka reports that as a status instead).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.deferred_responses import answer, client_host
from pybroker.broker.security.acls import CLUSTER_NAME
from pybroker.broker.security.authorization_check import (
    CLUSTER,
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    Check,
    Op,
    Outcome,
)
from pybroker.broker.streams_groups.assignor import Target, Tasks
from pybroker.broker.streams_groups.group import Endpoint
from pybroker.broker.streams_groups.outcomes import StreamsHeartbeat, StreamsHeartbeatOutcome
from pybroker.broker.streams_groups.records import topology_of
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.streams_group_heartbeat import (
    EndpointToPartitions,
    Status,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsGroupHeartbeatResponseEndpoint,
    StreamsGroupHeartbeatResponseTaskIds,
    TopicPartition,
)

#: Kafka 4.4's answers: v0's int32 field is 0; v1's int64 is its group.streams.acceptable.recovery.lag
#: (default 10,000 records). It bounds warm-up tasks, which Kafka 4.4's assignor, like ours, hands out none of.
ACCEPTABLE_RECOVERY_LAG_V0 = 0
ACCEPTABLE_RECOVERY_LAG = 10_000


def _tasks(ids: list[Any] | None) -> Tasks:
    out: dict[str, frozenset[int]] = {}
    for t in ids or ():
        out[t.subtopology_id] = out.get(t.subtopology_id, frozenset()) | frozenset(t.partitions)
    return {s: p for s, p in out.items() if p}


def _owned(r: StreamsGroupHeartbeatRequest) -> Target | None:
    if r.active_tasks is None and r.standby_tasks is None and r.warmup_tasks is None:
        return None
    return Target(_tasks(r.active_tasks), _tasks(r.standby_tasks), _tasks(r.warmup_tasks))


def _ids(tasks: Tasks) -> list[StreamsGroupHeartbeatResponseTaskIds]:
    return [StreamsGroupHeartbeatResponseTaskIds(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items())]


def _topic_partitions(parts: dict[str, list[int]]) -> list[TopicPartition]:
    return [TopicPartition(topic=t, partitions=p) for t, p in parts.items()]


def _response(o: StreamsHeartbeatOutcome) -> StreamsGroupHeartbeatResponse:
    a = o.assignment
    endpoints = None
    if o.endpoints is not None:
        endpoints = [EndpointToPartitions(
            user_endpoint=StreamsGroupHeartbeatResponseEndpoint(host=e.host, port=e.port),
            active_partitions=_topic_partitions(active), standby_partitions=_topic_partitions(standby))
            for e, active, standby in o.endpoints]
    return StreamsGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=o.error, error_message=o.message, member_id=o.member_id,
        member_epoch=o.member_epoch, heartbeat_interval_ms=o.heartbeat_interval_ms,
        acceptable_recovery_lag_legacy=ACCEPTABLE_RECOVERY_LAG_V0,
        acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG if o.error == 0 else -1,  # an error: the field's default
        topology_description_required=False, task_offset_interval_ms=o.task_offset_interval_ms,
        status=[Status(status_code=int(s.code), status_detail=s.detail) for s in o.statuses],
        active_tasks=None if a is None else _ids(a.active), standby_tasks=None if a is None else _ids(a.standby),
        warmup_tasks=None if a is None else _ids(a.warmup),
        endpoint_information_epoch=o.endpoint_information_epoch, partitions_by_user_endpoint=endpoints)


def _offsets(items: list[Any] | None) -> list[tuple[str, int, int]] | None:
    return None if items is None else [(t.subtopology_id, t.partition, t.offset) for t in items]


def topology_topics(r: StreamsGroupHeartbeatRequest) -> tuple[set[str], set[str]]:
    """(every topic the topology names, the internal ones among them)."""
    named: set[str] = set()
    internal: set[str] = set()
    for sub in (r.topology.subtopologies if r.topology is not None else ()):
        made = {t.name for t in (*sub.state_changelog_topics, *sub.repartition_source_topics)}
        internal |= made
        named |= made | set(sub.source_topics) | set(sub.repartition_sink_topics)
    return named, internal


def streams_group_heartbeat_rule(check: Check, r: StreamsGroupHeartbeatRequest) -> Outcome:
    def refuse(code: int, message: str) -> Any:
        return StreamsGroupHeartbeatResponse(error_code=code, error_message=message, member_id=r.member_id,
                                             member_epoch=r.member_epoch, status=[])

    if not check.ok(Op.READ, GROUP, r.group_id):
        return refuse(GROUP_DENIED, "not authorized to read the group")
    named, internal = topology_topics(r)
    denied = [t for t in sorted(named) if not check.ok(Op.DESCRIBE, TOPIC, t)]
    if denied:
        return refuse(TOPIC_DENIED, f"Topics not authorized: {', '.join(denied[:20])}")
    if internal and not check.ok(Op.CREATE, CLUSTER, CLUSTER_NAME, quiet=True):
        denied = [t for t in sorted(internal) if not check.ok(Op.CREATE, TOPIC, t)]
        if denied:
            return refuse(TOPIC_DENIED, f"Not authorized to create internal topics: {', '.join(denied[:20])}")
    return None


@handler(ApiKey.STREAMS_GROUP_HEARTBEAT, versions=(0, 1), authorize=streams_group_heartbeat_rule)
def handle_streams_group_heartbeat(ctx: RequestContext, r: StreamsGroupHeartbeatRequest) -> Any:
    state = ctx.state
    heartbeat = StreamsHeartbeat(
        group_id=r.group_id, member_id=r.member_id, member_epoch=r.member_epoch,
        endpoint_information_epoch=r.endpoint_information_epoch, instance_id=r.instance_id, rack_id=r.rack_id,
        rebalance_timeout_ms=r.rebalance_timeout_ms,
        topology=None if r.topology is None else topology_of(r.topology), owned=_owned(r),
        process_id=r.process_id,
        user_endpoint=None if r.user_endpoint is None else Endpoint(r.user_endpoint.host, r.user_endpoint.port),
        client_tags=None if r.client_tags is None else {kv.key: kv.value for kv in r.client_tags},
        task_offsets=_offsets(r.task_offsets), task_end_offsets=_offsets(r.task_end_offsets),
        shutdown_application=r.shutdown_application, client_id=ctx.client_id or "",
        client_host=client_host(ctx.peer), version=ctx.api_version)
    return answer(lambda respond: state.groups.coordinator.streams_heartbeat(heartbeat, state.clock_ms(), respond),
                  _response)
