"""StreamsGroupDescribe (key 89), versions 0-1: streams groups (KIP-1071) as their coordinator holds them.

Per group: state, group epoch, assignment epoch, the topology with each internal topic's partition count as
configured (0 while it cannot be), and per member its epochs, process, endpoint, client tags, task offsets
and its current and target tasks. A group that does not exist is GROUP_ID_NOT_FOUND ("Group x not found."),
and so is a group of another protocol ("... is not a streams group."), as in Kafka.

Version 1 (Kafka 4.4, KIP-1331) adds the assignor's name ("sticky", Kafka's) and, when asked for, the
topology description's status: NOT_STORED, since no description is stored (Kafka 4.4 stores none either
without a description plugin); a group not found gets neither, as from Kafka.

Authorizes DESCRIBE on each GROUP (GROUP_AUTHORIZATION_FAILED per group) and DESCRIBE on every topic its
topology names (TOPIC_AUTHORIZATION_FAILED for that group, its topology and members hidden).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.handlers.consumer_group_describe import GROUP_OPERATIONS, NOT_REQUESTED
from pybroker.broker.security.authorization_check import (
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    Check,
    Op,
    Outcome,
    split_by,
)
from pybroker.broker.streams_groups.assignor import Target, Tasks
from pybroker.broker.streams_groups.group import StreamsGroupData
from pybroker.broker.streams_groups.topology import TopicInfo as Info
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.streams_group_describe import (
    Assignment,
    DescribedGroup,
    Endpoint,
    KeyValue,
    Member,
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    Subtopology,
    TaskIds,
    TaskOffset,
    TopicInfo,
    Topology,
)


def _ids(tasks: Tasks) -> list[TaskIds]:
    return [TaskIds(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items())]


def _assignment(t: Target) -> Assignment:
    return Assignment(active_tasks=_ids(t.active), standby_tasks=_ids(t.standby), warmup_tasks=_ids(t.warmup))


def _infos(infos: tuple[Info, ...], partitions: dict[str, int]) -> list[TopicInfo]:
    return [TopicInfo(name=i.name, partitions=partitions.get(i.name, i.partitions),
                      replication_factor=i.replication_factor,
                      topic_configs=[KeyValue(key=k, value=v) for k, v in i.configs]) for i in infos]


def _topology(data: StreamsGroupData) -> Topology | None:
    if data.topology is None:
        return None
    partitions = data.configured.partitions if data.configured is not None else {}
    return Topology(epoch=data.topology.epoch, subtopologies=[Subtopology(
        subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
        repartition_sink_topics=list(s.repartition_sink_topics),
        state_changelog_topics=_infos(s.state_changelog_topics, partitions),
        repartition_source_topics=_infos(s.repartition_source_topics, partitions))
        for s in data.topology.subtopologies])


#: KIP-1331's TopologyDescriptionStatus values
DESCRIPTION_NOT_REQUESTED, DESCRIPTION_NOT_STORED = 0, 1
#: the name Kafka's sticky task assignor reports, which kafka-streams-groups shows
ASSIGNOR_NAME = "sticky"


def _describe(ctx: RequestContext, group_id: str, operations: int, description_status: int) -> DescribedGroup:
    error, group = ctx.state.groups.coordinator.describe(group_id)
    if error is not ErrorCode.NONE:
        return DescribedGroup(error_code=error, group_id=group_id, authorized_operations=operations)
    if group is None or group.streams is None:
        message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a streams group."
        return DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id,
                              authorized_operations=operations)
    data = group.streams
    members = [Member(
        member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
        client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch, process_id=m.process_id,
        user_endpoint=None if m.user_endpoint is None else Endpoint(host=m.user_endpoint.host, port=m.user_endpoint.port),
        client_tags=[KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
        task_offsets=[TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in m.task_offsets],
        task_end_offsets=[TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in m.task_end_offsets],
        assignment=_assignment(m.assigned), target_assignment=_assignment(data.targets.get(m.member_id, Target())),
        is_classic=False) for m in data.members.values()]
    return DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id, group_state=data.state.value,
                          group_epoch=data.group_epoch, assignment_epoch=data.assignment_epoch,
                          topology=_topology(data), members=members, authorized_operations=operations,
                          topology_description_status=description_status, assignor_name=ASSIGNOR_NAME)


def streams_group_describe_rule(check: Check, r: StreamsGroupDescribeRequest) -> Outcome:
    kept, denied = split_by(r.group_ids, lambda g: check.ok(Op.DESCRIBE, GROUP, g))
    r.group_ids = kept
    include_ops = bool(r.include_authorized_operations)

    def merge(response: Any) -> Any:
        for group in response.groups:
            topology = group.topology
            names = {n for s in (topology.subtopologies or [] if topology else [])
                     for n in (*s.source_topics, *s.repartition_sink_topics,
                               *(t.name for t in (*s.state_changelog_topics, *s.repartition_source_topics)))}
            if group.error_code == 0 and not all(check.ok(Op.DESCRIBE, TOPIC, n) for n in sorted(names)):
                group.error_code = TOPIC_DENIED
                group.error_message = "The described group uses topics that the client is not authorized to describe."
                group.members, group.topology = [], None
                group.authorized_operations = NOT_REQUESTED
            elif include_ops:
                group.authorized_operations = check.operations(GROUP, group.group_id)
        response.groups.extend(DescribedGroup(error_code=GROUP_DENIED, error_message="not authorized to describe "
                                              "the group", group_id=g) for g in denied)
        return response
    return merge


@handler(ApiKey.STREAMS_GROUP_DESCRIBE, versions=(0, 1), authorize=streams_group_describe_rule)
def handle_streams_group_describe(ctx: RequestContext, request: StreamsGroupDescribeRequest
                                  ) -> StreamsGroupDescribeResponse:
    operations = GROUP_OPERATIONS if request.include_authorized_operations else NOT_REQUESTED
    status = DESCRIPTION_NOT_STORED if request.include_topology_description else DESCRIPTION_NOT_REQUESTED
    return StreamsGroupDescribeResponse(throttle_time_ms=0, groups=[
        _describe(ctx, group_id, operations, status) for group_id in request.group_ids])
