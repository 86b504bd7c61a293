"""A streams group in `__consumer_offsets`: the records the coordinator writes for each change, and the
group rebuilt from the last of them at startup (KIP-1071's record kinds, key versions 17-23).

What is written when: the topology (23) when the group takes one; a member's metadata (19) when it joins
or its process, endpoint, tags or topology epoch change; the group epoch with the topics' hash (17) when
the epoch moves; each changed member target (21) and the target epoch (20) when a new target is computed;
a member's current assignment (22) when its reconciliation moves. A member that goes leaves tombstones of
22, 21 and 19; a group that goes, of 20, 23 and 17 (Kafka's order of dependence, reversed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pybroker.broker.groups.group_log import Records
from pybroker.broker.streams_groups.assignor import Target, Tasks
from pybroker.broker.streams_groups.group import Endpoint, MemberState, StreamsGroupData, StreamsMember
from pybroker.broker.streams_groups.topology import Subtopology, TopicInfo, Topology
from pybroker.protocol.messages import streams_group_records as m
from pybroker.protocol.streams_offsets_records import (
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    STREAMS_GROUP_MEMBER_METADATA,
    STREAMS_GROUP_METADATA,
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
    STREAMS_GROUP_TOPOLOGY,
    StreamsRecord,
    streams_key,
    streams_value,
)


def _target_ids(tasks: Tasks) -> list[Any]:
    return [m.StreamsGroupTargetAssignmentMemberValueTaskIds(subtopology_id=s, partitions=sorted(p))
            for s, p in sorted(tasks.items()) if p]


def _current_ids(tasks: Tasks) -> list[Any]:
    return [m.StreamsGroupCurrentMemberAssignmentValueTaskIds(subtopology_id=s, partitions=sorted(p))
            for s, p in sorted(tasks.items()) if p]


def _topic_infos(infos: tuple[TopicInfo, ...]) -> list[Any]:
    return [m.TopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                        topic_configs=[m.TopicConfig(key=k, value=v) for k, v in t.configs]) for t in infos]


def topology_record(group_id: str, topology: Topology) -> tuple[bytes, bytes]:
    value = m.StreamsGroupTopologyValue(epoch=topology.epoch, subtopologies=[m.Subtopology(
        subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
        source_topic_regex=list(s.source_topic_regex), state_changelog_topics=_topic_infos(s.state_changelog_topics),
        repartition_sink_topics=list(s.repartition_sink_topics),
        repartition_source_topics=_topic_infos(s.repartition_source_topics),
        copartition_groups=[m.CopartitionGroup(source_topics=list(a), source_topic_regex=list(b),
                                               repartition_source_topics=list(c)) for a, b, c in s.copartition_groups])
        for s in topology.subtopologies])
    return streams_key(STREAMS_GROUP_TOPOLOGY, group_id), streams_value(value)


def member_record(group_id: str, member: StreamsMember) -> tuple[bytes, bytes]:
    endpoint = None if member.user_endpoint is None else m.Endpoint(host=member.user_endpoint.host,
                                                                     port=member.user_endpoint.port)
    value = m.StreamsGroupMemberMetadataValue(
        instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
        client_host=member.client_host, rebalance_timeout_ms=member.rebalance_timeout_ms,
        topology_epoch=member.topology_epoch, process_id=member.process_id, user_endpoint=endpoint,
        client_tags=[m.KeyValue(key=k, value=v) for k, v in sorted(member.client_tags.items())])
    return streams_key(STREAMS_GROUP_MEMBER_METADATA, group_id, member.member_id), streams_value(value)


def epoch_record(group_id: str, data: StreamsGroupData) -> tuple[bytes, bytes]:
    value = m.StreamsGroupMetadataValue(epoch=data.group_epoch, metadata_hash=data.metadata_hash)
    return streams_key(STREAMS_GROUP_METADATA, group_id), streams_value(value)


def target_records(group_id: str, data: StreamsGroupData, changed: list[str]) -> Records:
    records: Records = []
    for member_id in changed:
        target = data.targets.get(member_id, Target())
        records.append((streams_key(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                        streams_value(m.StreamsGroupTargetAssignmentMemberValue(
                            active_tasks=_target_ids(target.active), standby_tasks=_target_ids(target.standby),
                            warmup_tasks=_target_ids(target.warmup)))))
    records.append((streams_key(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
                    streams_value(m.StreamsGroupTargetAssignmentMetadataValue(
                        assignment_epoch=data.assignment_epoch))))
    return records


def current_record(group_id: str, member: StreamsMember) -> tuple[bytes, bytes]:
    a, r = member.assigned, member.pending_revocation
    value = m.StreamsGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
        state=int(member.state), active_tasks=_current_ids(a.active), standby_tasks=_current_ids(a.standby),
        warmup_tasks=_current_ids(a.warmup), active_tasks_pending_revocation=_current_ids(r.active),
        standby_tasks_pending_revocation=_current_ids(r.standby),
        warmup_tasks_pending_revocation=_current_ids(r.warmup))
    return streams_key(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id), streams_value(value)


def member_tombstones(group_id: str, member_id: str) -> Records:
    return [(streams_key(kind, group_id, member_id), None) for kind in (
        STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
        STREAMS_GROUP_MEMBER_METADATA)]


def group_tombstones(group_id: str, data: StreamsGroupData) -> Records:
    records: Records = []
    for member_id in data.members:
        records += member_tombstones(group_id, member_id)
    return records + [(streams_key(kind, group_id), None) for kind in (
        STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, STREAMS_GROUP_TOPOLOGY, STREAMS_GROUP_METADATA)]


# -- replay ------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ReplayedStreamsGroup:
    """The last value of every streams-group key of one group (tombstoned keys are gone)."""

    epoch: Any = None
    topology: Any = None
    target_epoch: int = 0
    members: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, Any] = field(default_factory=dict)
    current: dict[str, Any] = field(default_factory=dict)

    def apply(self, record: StreamsRecord) -> None:
        by_member = {STREAMS_GROUP_MEMBER_METADATA: self.members, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: self.targets,
                     STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: self.current}.get(record.kind)
        if by_member is not None and record.member_id is not None:
            if record.value is None:
                by_member.pop(record.member_id, None)
            else:
                by_member[record.member_id] = record.value
        elif record.kind == STREAMS_GROUP_METADATA:
            self.epoch = record.value
        elif record.kind == STREAMS_GROUP_TOPOLOGY:
            self.topology = record.value
        elif record.kind == STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.target_epoch = record.value.assignment_epoch if record.value is not None else 0

    @property
    def exists(self) -> bool:
        return self.epoch is not None


def _tasks(ids: list[Any]) -> Tasks:
    return {t.subtopology_id: frozenset(t.partitions) for t in ids if t.partitions}


def _infos(infos: list[Any]) -> tuple[TopicInfo, ...]:
    return tuple(TopicInfo(t.name, t.partitions, t.replication_factor,
                           tuple((c.key, c.value) for c in t.topic_configs)) for t in infos)


def topology_of(value: Any) -> Topology:
    """A topology from its record (kind 23) or from a heartbeat's, which has the same shape."""
    return Topology(value.epoch, tuple(Subtopology(
        s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex), _infos(s.state_changelog_topics),
        tuple(s.repartition_sink_topics), _infos(s.repartition_source_topics),
        tuple((tuple(g.source_topics), tuple(g.source_topic_regex), tuple(g.repartition_source_topics))
              for g in s.copartition_groups)) for s in value.subtopologies))


def restore_streams(replayed: ReplayedStreamsGroup, now: int) -> StreamsGroupData:
    """The group as its records left it; every member gets a fresh session from `now`."""
    assert replayed.epoch is not None
    data = StreamsGroupData(group_epoch=replayed.epoch.epoch, assignment_epoch=replayed.target_epoch,
                            metadata_hash=replayed.epoch.metadata_hash)
    if replayed.topology is not None:
        data.topology = topology_of(replayed.topology)
    for member_id, value in replayed.members.items():
        endpoint = None if value.user_endpoint is None else Endpoint(value.user_endpoint.host,
                                                                     value.user_endpoint.port)
        member = StreamsMember(
            member_id, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, rebalance_timeout_ms=value.rebalance_timeout_ms,
            topology_epoch=value.topology_epoch, process_id=value.process_id, user_endpoint=endpoint,
            client_tags={kv.key: kv.value for kv in value.client_tags}, last_heartbeat_ms=now)
        current = replayed.current.get(member_id)
        if current is not None:
            member.member_epoch = current.member_epoch
            member.previous_member_epoch = current.previous_member_epoch
            member.state = MemberState(current.state) if current.state in MemberState._value2member_map_ \
                else MemberState.STABLE
            member.assigned = Target(_tasks(current.active_tasks), _tasks(current.standby_tasks),
                                     _tasks(current.warmup_tasks))
            member.pending_revocation = Target(_tasks(current.active_tasks_pending_revocation),
                                               _tasks(current.standby_tasks_pending_revocation),
                                               _tasks(current.warmup_tasks_pending_revocation))
        data.members[member_id] = member
        if member.instance_id is not None:
            data.static_members[member.instance_id] = member_id
    for member_id, value in replayed.targets.items():
        if member_id in data.members:
            data.targets[member_id] = Target(_tasks(value.active_tasks), _tasks(value.standby_tasks),
                                             _tasks(value.warmup_tasks))
    data.refresh_state()
    return data
