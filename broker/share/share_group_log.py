"""Share groups in `__consumer_offsets` (KIP-932's record kinds 10-15): the records each change writes,
and the groups rebuilt from the last of them when the offsets topic is loaded.

Membership changes in `share_groups.py` are pure; this module compares each group with what was last
written for it and writes the difference as one batch, fsynced before the heartbeat that made it is
answered (`ShareService.write_group`). In Kafka's order: a departed member's tombstones (current
assignment 14, target 13, metadata 10), then a member's metadata (10) when it joins or its rack, client or
subscription change, the group epoch with the topics' hash (11), each changed target (13) and the target
epoch (12), each member's current assignment (14: its epoch, previous epoch and the partitions it was
answered), and the initialized share-partitions (15). A deleted group leaves tombstones of all of them.

A member's current assignment is what it was last answered, so after a restart a member heartbeating with
its epoch (or the one before, if the answer that moved it was lost) carries on where it was.

Threads: the event loop only (replay's `ReplayedShareGroup.apply` runs in the loading thread, on its own data).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pybroker.broker.groups.group_log import Records
from pybroker.broker.share.share_groups import Assignment, ShareGroup, ShareMember
from pybroker.protocol.messages import share_group_records as m
from pybroker.protocol.share_offsets_records import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    ShareRecord,
    share_key,
    share_value,
)

#: Kafka's MemberState.STABLE: a share group member never waits on a revocation
STABLE = 0
_Parts = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


def _parts(assignment: Assignment | None) -> _Parts:
    return tuple((t, tuple(sorted(p))) for t, p in sorted((assignment or {}).items(), key=lambda i: str(i[0])) if p)


@dataclass(frozen=True, slots=True)
class _MemberView:
    metadata: tuple[str | None, str, str, tuple[str, ...]]
    target: _Parts
    current: tuple[int, int, _Parts]


@dataclass(slots=True)
class Written:
    """What the log holds for one group (the last value of each of its keys)."""

    epoch: tuple[int, int] | None = None
    assignment_epoch: int | None = None
    initialized: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...] | None = None
    members: dict[str, _MemberView] = field(default_factory=dict)


def _view(member: ShareMember) -> _MemberView:
    return _MemberView((member.rack_id, member.client_id, member.client_host, member.subscribed),
                       _parts(member.assignment),
                       (member.member_epoch, member.previous_member_epoch, _parts(member.sent)))


def _initialized(group: ShareGroup) -> tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]:
    return tuple((t, name, tuple(sorted(p))) for t, (name, p) in sorted(group.initialized.items(),
                                                                        key=lambda i: str(i[0])))


def member_tombstones(group_id: str, member_id: str) -> Records:
    return [(share_key(kind, group_id, member_id), None) for kind in (
        SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, SHARE_GROUP_MEMBER_METADATA)]


def changes(group: ShareGroup, written: Written) -> tuple[Records, Written]:
    """The records that bring the log from `written` to `group`, and what the log holds after them."""
    gid = group.group_id
    records: Records = []
    after = Written(written.epoch, written.assignment_epoch, written.initialized, {})
    views = {member_id: _view(member) for member_id, member in group.members.items()}
    for member_id in written.members.keys() - views.keys():
        records += member_tombstones(gid, member_id)
    for member_id, view in views.items():
        before = written.members.get(member_id)
        if before is None or before.metadata != view.metadata:
            rack, client_id, client_host, subscribed = view.metadata
            records.append((share_key(SHARE_GROUP_MEMBER_METADATA, gid, member_id), share_value(
                m.ShareGroupMemberMetadataValue(rack_id=rack, client_id=client_id, client_host=client_host,
                                                subscribed_topic_names=list(subscribed)))))
    if written.epoch != (group.epoch, group.metadata_hash):
        records.append((share_key(SHARE_GROUP_METADATA, gid), share_value(
            m.ShareGroupMetadataValue(epoch=group.epoch, metadata_hash=group.metadata_hash))))
        after.epoch = (group.epoch, group.metadata_hash)
    targets_moved = False
    for member_id, view in views.items():
        before = written.members.get(member_id)
        if before is None or before.target != view.target:
            targets_moved = True
            records.append((share_key(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id), share_value(
                m.ShareGroupTargetAssignmentMemberValue(topic_partitions=[
                    m.TopicPartition(topic_id=t, partitions=list(p)) for t, p in view.target]))))
    if targets_moved or written.assignment_epoch != group.assignment_epoch:
        records.append((share_key(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, gid), share_value(
            m.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=group.assignment_epoch))))
        after.assignment_epoch = group.assignment_epoch
    for member_id, view in views.items():
        before = written.members.get(member_id)
        if before is None or before.current != view.current:
            epoch, previous, parts = view.current
            records.append((share_key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, member_id), share_value(
                m.ShareGroupCurrentMemberAssignmentValue(
                    member_epoch=epoch, previous_member_epoch=previous, state=STABLE,
                    assigned_partitions=[m.TopicPartitions(topic_id=t, partitions=list(p)) for t, p in parts]))))
    initialized = _initialized(group)
    if initialized != (written.initialized or ()):
        records.append((share_key(SHARE_GROUP_STATE_PARTITION_METADATA, gid), share_value(
            m.ShareGroupStatePartitionMetadataValue(initializing_topics=[], deleting_topics=[], initialized_topics=[
                m.TopicPartitionsInfo(topic_id=t, topic_name=name, partitions=list(p)) for t, name, p in initialized]))))
        after.initialized = initialized
    after.members = views
    return records, after


def group_tombstones(group_id: str, written: Written) -> Records:
    """Everything a deleted group left in the log, tombstoned (members first, then the group's keys)."""
    records: Records = []
    for member_id in written.members:
        records += member_tombstones(group_id, member_id)
    return records + [(share_key(kind, group_id), None) for kind in (
        SHARE_GROUP_STATE_PARTITION_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, SHARE_GROUP_METADATA)]


# -- replay ------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ReplayedShareGroup:
    """The last value of every share-group key of one group (tombstoned keys are gone)."""

    epoch: Any = None
    target_epoch: int = 0
    state_partitions: Any = None
    members: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, Any] = field(default_factory=dict)
    current: dict[str, Any] = field(default_factory=dict)

    def apply(self, record: ShareRecord) -> None:
        by_member = {SHARE_GROUP_MEMBER_METADATA: self.members, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: self.targets,
                     SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: self.current}.get(record.kind)
        if by_member is not None and record.member_id is not None:
            if record.value is None:
                by_member.pop(record.member_id, None)
            else:
                by_member[record.member_id] = record.value
        elif record.kind == SHARE_GROUP_METADATA:
            self.epoch = record.value
        elif record.kind == SHARE_GROUP_STATE_PARTITION_METADATA:
            self.state_partitions = record.value
        elif record.kind == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.target_epoch = record.value.assignment_epoch if record.value is not None else 0

    @property
    def exists(self) -> bool:
        return self.epoch is not None


def _assignment(topic_partitions: list[Any]) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


def restore_share_group(group_id: str, replayed: ReplayedShareGroup, deadline_ms: int) -> tuple[ShareGroup, Written]:
    """The group as its records left it (every member's session restarting, to end at `deadline_ms`), and
    what the log holds for it."""
    assert replayed.epoch is not None
    group = ShareGroup(group_id, epoch=replayed.epoch.epoch, assignment_epoch=replayed.target_epoch,
                       metadata_hash=replayed.epoch.metadata_hash)
    if replayed.state_partitions is not None:
        group.initialized = {t.topic_id: (t.topic_name, frozenset(t.partitions))
                             for t in replayed.state_partitions.initialized_topics}
    for member_id, value in replayed.members.items():
        member = ShareMember(member_id, 0, value.client_id, value.client_host, value.rack_id,
                             tuple(value.subscribed_topic_names), deadline_ms)
        target = replayed.targets.get(member_id)
        if target is not None:
            member.assignment = _assignment(target.topic_partitions)
        current = replayed.current.get(member_id)
        if current is not None:
            member.member_epoch = current.member_epoch
            member.previous_member_epoch = current.previous_member_epoch
            member.sent = _assignment(current.assigned_partitions)
        group.members[member_id] = member
    written = Written(None, None, None, {})
    _records, written = changes(group, written)
    return group, written
