"""Undoing a consumer-group change whose records could not be written (Kafka reverts its in-memory state to
the last committed offset when a write to `__consumer_offsets` fails).

A change is computed in memory, its records appended, and it is answered once they are durable. Before
the change, `ConsumerUndo.take` keeps what a heartbeat or a classic member's JoinGroup may alter: the
group's own fields, the consumer part's epochs and maps (copied: they are mutated in place), and a copy of
the one member the request names (the only member object a request changes in place; others are only
added to or removed from the maps). If the write fails, `restore` puts all of it back, and rebuilds who
owns which partition from the members. The cost is a few dict copies per change, not a copy of the group.

Writes complete in order: once a change is undone, every later change to that group made before the undo
is gone with it, so their own failures (which follow) restore nothing (`_undone_at`). A change that
turned the group into a classic group (the downgrade, which schedules a classic rebalance) is not undone,
nor is a group deleted meanwhile brought back.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, fields

from pybroker.broker.groups.consumer_group import ConsumerGroupData, ConsumerMember
from pybroker.broker.groups.group import Group
from pybroker.broker.groups.state_machine import GroupState

_GROUP_FIELDS = ("state", "state_timestamp_ms", "generation", "protocol_type", "protocol_name", "leader_id",
                 "consumer")
_DATA_SCALARS = ("group_epoch", "assignment_epoch", "state", "subscription_metadata", "assignor",
                 "metadata_source")
_MEMBER_FIELDS = tuple(f.name for f in fields(ConsumerMember))
#: how many groups' undo marks are kept (a mark only matters while that group's writes are in flight)
MAX_MARKS = 10_000


@dataclass(slots=True)
class Snapshot:
    group_id: str
    sequence: int
    #: None when the request created the group
    group: Group | None
    group_fields: tuple[object, ...] = ()
    data: ConsumerGroupData | None = None
    data_scalars: tuple[object, ...] = ()
    members: dict[str, ConsumerMember] | None = None
    targets: dict | None = None
    static_members: dict[str, str] | None = None
    #: (the member object, a copy of it as it was)
    member: tuple[ConsumerMember, ConsumerMember] | None = None


class ConsumerUndo:
    def __init__(self) -> None:
        self._sequence = itertools.count()
        #: group id -> the sequence number at its last undo: snapshots taken before it are void
        self._undone_at: dict[str, int] = {}

    def take(self, groups: dict[str, Group], group_id: str, member_id: str | None) -> Snapshot:
        group = groups.get(group_id)
        snap = Snapshot(group_id, next(self._sequence), group)
        if group is None:
            return snap
        snap.group_fields = tuple(getattr(group, name) for name in _GROUP_FIELDS)
        data = group.consumer
        if data is None:
            return snap
        snap.data = data
        snap.data_scalars = tuple(getattr(data, name) for name in _DATA_SCALARS)
        snap.members, snap.targets = dict(data.members), dict(data.targets)
        snap.static_members = dict(data.static_members)
        member = data.members.get(member_id) if member_id else None
        if member is not None:
            snap.member = (member, copy.copy(member))
        return snap

    @staticmethod
    def converted(groups: dict[str, Group], snap: Snapshot) -> bool:
        """Whether the group changed protocol since `snap` (a refused request must not leave that behind)."""
        current = groups.get(snap.group_id)
        return snap.group is not None and (current is not snap.group or current.consumer is not snap.data)

    def restore(self, groups: dict[str, Group], snap: Snapshot, *, written: bool = True) -> bool:
        """Put the group back as `snap` saw it; False when it is not undone (see the module docstring).
        `written`: the change's records went to the log (False: a request refused after changing the group
        wrote nothing, so changes made after it are not undone with it)."""
        if snap.sequence < self._undone_at.get(snap.group_id, -1):
            return False
        current = groups.get(snap.group_id)
        if snap.group is not None and (current is None or current.is_(GroupState.DEAD)
                                       or snap.group.is_(GroupState.DEAD)):
            return False  # deleted meanwhile: it stays deleted
        if current is not None and current.consumer is None and snap.data is not None:
            return False  # it became a classic group (a downgrade): not undone
        if snap.group is None:
            if current is not None:
                if current.offsets or current.pending_txn:
                    current.consumer = ConsumerGroupData()  # offsets committed meanwhile stay
                else:
                    del groups[snap.group_id]
        else:
            groups[snap.group_id] = snap.group  # an upgrade replaced the group object
            for name, value in zip(_GROUP_FIELDS, snap.group_fields, strict=True):
                setattr(snap.group, name, value)
            if snap.data is not None:
                _restore_data(snap)
        if written:
            if len(self._undone_at) >= MAX_MARKS:
                self._undone_at.clear()
            self._undone_at[snap.group_id] = next(self._sequence)
        return True


def _restore_data(snap: Snapshot) -> None:
    data = snap.data
    assert data is not None and snap.members is not None and snap.targets is not None
    assert snap.static_members is not None
    for name, value in zip(_DATA_SCALARS, snap.data_scalars, strict=True):
        setattr(data, name, value)
    data.members, data.targets, data.static_members = snap.members, snap.targets, snap.static_members
    if snap.member is not None:
        live, saved = snap.member
        for name in _MEMBER_FIELDS:
            setattr(live, name, getattr(saved, name))
    data.partition_epochs, data.partition_owners = {}, {}
    for member in data.members.values():
        data.claim(member)
