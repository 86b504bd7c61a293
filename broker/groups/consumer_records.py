"""A consumer-protocol group in `__consumer_offsets`: the records the coordinator writes for each change,
and the group rebuilt from the last of them at startup (KIP-848's record kinds, key versions 3-8).

What is written when: a member's subscription (5) and the group epoch (3), with the topics the target is
computed from (4), when the group epoch moves; each changed member target (7) and the assignment epoch
(6) when a new target is computed; a member's current assignment (8) when its reconciliation moves. A
member that goes leaves tombstones of 8, 7 and 5; a group that goes, of 6, 4 and 3 (Kafka's order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pybroker.broker.groups.consumer_group import (
    Assignment,
    ClassicMemberInfo,
    ConsumerGroupData,
    ConsumerMember,
)
from pybroker.broker.groups.consumer_state_machine import MemberState
from pybroker.broker.groups.group_log import Records
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.messages.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    CurrentTopicPartitions,
    TargetTopicPartition,
    TopicMetadata,
)
from pybroker.protocol.offsets_topic_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerRecord,
    consumer_key,
    consumer_value,
)

log = get_logger("pybroker.groups")


def _current(assignment: Assignment, m: ConsumerMember) -> list[CurrentTopicPartitions]:
    """Each topic's partitions, sorted, with the epoch at which the member got each (KIP-1251's
    `AssignmentEpochs`: a commit at an older epoch stays valid for them after a restart or a takeover)."""
    default = _epoch_floor(m.member_epoch)
    rows = []
    for topic, parts in sorted(assignment.items()):
        ordered = sorted(parts)
        rows.append(CurrentTopicPartitions(topic_id=topic, partitions=ordered, assignment_epochs=[
            m.assignment_epochs.get((topic, p), default) for p in ordered]))
    return rows


def _epoch_floor(member_epoch: int) -> int:
    """A partition's assignment epoch where none is known: the member's, never below 0 (a static member
    that left holds -2; Kafka reads a record without the epochs that way)."""
    return max(member_epoch, 0)


def member_record(group_id: str, m: ConsumerMember) -> tuple[bytes, bytes]:
    classic = None
    if m.classic is not None:
        classic = ClassicMemberMetadata(session_timeout_ms=m.classic.session_timeout_ms, supported_protocols=[
            ClassicProtocol(name=name, metadata=metadata) for name, metadata in m.classic.protocols])
    value = ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=classic)
    return consumer_key(CONSUMER_GROUP_MEMBER_METADATA, group_id, m.member_id), consumer_value(value)


def epoch_records(group_id: str, data: ConsumerGroupData) -> Records:
    topics = [TopicMetadata(topic_id=tid, topic_name=name, num_partitions=count)
              for name, (tid, count) in sorted(data.subscription_metadata.items())]
    return [(consumer_key(CONSUMER_GROUP_PARTITION_METADATA, group_id),
             consumer_value(ConsumerGroupPartitionMetadataValue(topics=topics))),
            (consumer_key(CONSUMER_GROUP_METADATA, group_id),
             consumer_value(ConsumerGroupMetadataValue(epoch=data.group_epoch)))]


def target_records(group_id: str, data: ConsumerGroupData, changed: list[str]) -> Records:
    records: Records = [(consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                         consumer_value(ConsumerGroupTargetAssignmentMemberValue(topic_partitions=[
                             TargetTopicPartition(topic_id=t, partitions=sorted(p))
                             for t, p in sorted(data.targets.get(member_id, {}).items())])))
                        for member_id in changed]
    records.append((consumer_key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
                    consumer_value(ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=data.assignment_epoch))))
    return records


def current_record(group_id: str, m: ConsumerMember) -> tuple[bytes, bytes]:
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
        assigned_partitions=_current(m.assigned, m), partitions_pending_revocation=_current(m.pending_revocation, m))
    return consumer_key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), consumer_value(value)


def member_tombstones(group_id: str, member_id: str) -> Records:
    return [(consumer_key(kind, group_id, member_id), None) for kind in (
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_MEMBER_METADATA)]


def group_tombstones(group_id: str, data: ConsumerGroupData) -> Records:
    records: Records = []
    for member_id in data.members:
        records += member_tombstones(group_id, member_id)
    return records + [(consumer_key(kind, group_id), None) for kind in (
        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_METADATA)]


# -- replay ------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ReplayedConsumerGroup:
    """The last value of every consumer-protocol key of one group (tombstoned keys are gone)."""

    epoch: ConsumerGroupMetadataValue | None = None
    partition_metadata: Any = None
    target_epoch: int = 0
    members: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, Any] = field(default_factory=dict)
    current: dict[str, Any] = field(default_factory=dict)

    def apply(self, record: ConsumerRecord) -> None:
        by_member = {CONSUMER_GROUP_MEMBER_METADATA: self.members, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: self.targets,
                     CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: self.current}.get(record.kind)
        if by_member is not None and record.member_id is not None:
            if record.value is None:
                by_member.pop(record.member_id, None)
            else:
                by_member[record.member_id] = record.value
        elif record.kind == CONSUMER_GROUP_METADATA:
            self.epoch = record.value
        elif record.kind == CONSUMER_GROUP_PARTITION_METADATA:
            self.partition_metadata = record.value
        elif record.kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.target_epoch = record.value.assignment_epoch if record.value is not None else 0

    @property
    def exists(self) -> bool:
        return self.epoch is not None


def _assignment(parts: list[Any]) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in parts if tp.partitions}


def _assignment_epochs(member_id: str, member_epoch: int, parts: list[Any]) -> dict[tuple[Any, int], int]:
    """The epoch at which the member got each partition of a current-assignment record: the record's
    `AssignmentEpochs` when it has one per partition, else the member's epoch (a record written before
    KIP-1251; Kafka logs a list of another length as an error and does the same)."""
    default = _epoch_floor(member_epoch)
    epochs: dict[tuple[Any, int], int] = {}
    for tp in parts:
        given = tp.assignment_epochs or []
        if len(given) != len(tp.partitions):
            if given:
                log.error("assignment epochs do not match the partitions; the member's epoch stands for them",
                          member_id=member_id, topic_id=str(tp.topic_id), epochs=len(given),
                          partitions=len(tp.partitions))
            given = [default] * len(tp.partitions)
        epochs.update(((tp.topic_id, p), epoch) for p, epoch in zip(tp.partitions, given, strict=True))
    return epochs


def restore_consumer(replayed: ReplayedConsumerGroup, now: int) -> ConsumerGroupData:
    """The group as its records left it; every member gets a fresh session from `now` (as after a move)."""
    assert replayed.epoch is not None
    data = ConsumerGroupData(group_epoch=replayed.epoch.epoch, assignment_epoch=replayed.target_epoch)
    if replayed.partition_metadata is not None:
        data.subscription_metadata = {t.topic_name: (t.topic_id, t.num_partitions)
                                      for t in replayed.partition_metadata.topics}
    for member_id, value in replayed.members.items():
        member = ConsumerMember(
            member_id, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=list(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor, last_heartbeat_ms=now)
        classic = value.classic_member_metadata
        if classic is not None:
            member.classic = ClassicMemberInfo(classic.session_timeout_ms,
                                               [(p.name, p.metadata) for p in classic.supported_protocols])
        current = replayed.current.get(member_id)
        if current is not None:
            member.member_epoch = current.member_epoch
            member.previous_member_epoch = current.previous_member_epoch
            member.state = MemberState(current.state) if current.state in MemberState._value2member_map_ \
                else MemberState.STABLE
            member.assigned = _assignment(current.assigned_partitions)
            member.pending_revocation = _assignment(current.partitions_pending_revocation)
            member.assignment_epochs = _assignment_epochs(
                member_id, current.member_epoch,
                [*current.assigned_partitions, *current.partitions_pending_revocation])
        data.members[member_id] = member
        if member.instance_id is not None:
            data.static_members[member.instance_id] = member_id
        data.claim(member)
    for member_id, value in replayed.targets.items():
        if member_id in data.members:
            data.targets[member_id] = _assignment(value.topic_partitions)
    data.refresh_state()
    return data

