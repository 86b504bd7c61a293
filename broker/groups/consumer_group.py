"""A consumer-protocol group's membership (KIP-848) as the coordinator holds it.

Assignments are by topic id (what ConsumerGroupHeartbeat carries): `Assignment` maps a topic id to its
partitions. Every member has a target (what the assignor wants it to have at the assignment epoch) and a
current assignment it reconciles towards the target (`reconciliation.py`). `partition_epochs` is the
group's record of who owns what: a partition is owned by the member holding it in its assigned
partitions or its partitions pending revocation, and the coordinator gives it to nobody else until
that owner has let it go. Plain data plus small queries; the rules live in `consumer_groups.py`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pybroker.broker.groups.consumer_state_machine import (
    ConsumerGroupState,
    MemberState,
    Observation,
    next_state,
)
from pybroker.broker.groups.topic_regex import TopicFilter

Assignment = dict[uuid.UUID, frozenset[int]]

#: epoch a member sends to leave; -2: a static member leaving that will come back
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


def assignment_size(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


def without_empty(assignment: Assignment) -> Assignment:
    return {topic: parts for topic, parts in assignment.items() if parts}


@dataclass(slots=True)
class ClassicMemberInfo:
    """A member that joined a consumer group with the classic protocol (JoinGroup): its session timeout and
    protocols (name, subscription bytes), as ConsumerGroupMemberMetadataValue's ClassicMemberMetadata keeps them."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: (topic id, partition) -> the member epoch at which it got that partition (KIP-1251's assignment epoch),
    #: for what it holds (assigned or pending revocation). A partition missing here counts as assigned at
    #: the member's current epoch (as Kafka reads a record written without them): a replaced dict, never mutated
    assignment_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    #: the time of its last heartbeat (its session runs from here)
    last_heartbeat_ms: int = 0
    #: when it must have revoked what it was asked to (UnrevokedPartitions only; -1: no deadline)
    revocation_deadline_ms: int = -1
    #: set for a member of the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a consumer group
    classic: ClassicMemberInfo | None = None
    #: the topics its regex may bring it (its principal's DESCRIBE ACLs; None: all). Held in memory only:
    #: after a restart, until the member's next heartbeat carrying its subscription, its regex is unfiltered
    topic_filter: TopicFilter | None = None


@dataclass(slots=True)
class ConsumerGroupData:
    """The consumer-protocol part of a group (`Group.consumer`); offsets stay on the `Group`."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    #: member id -> its target assignment at `assignment_epoch`
    targets: dict[str, Assignment] = field(default_factory=dict)
    #: instance id -> the member id of the static member holding it
    static_members: dict[str, str] = field(default_factory=dict)
    #: (topic id, partition) -> epoch of the member owning it (assigned or pending revocation)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    #: (topic id, partition) -> the member owning it
    partition_owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    #: topic name -> (topic id, partitions): what the last target assignment was computed from
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    #: the assignor the last target was computed with
    assignor: str = ""
    #: the topic table `subscription_metadata` was last computed from (a heartbeat recomputes it when that changed)
    metadata_source: object = None

    # -- ownership ---------------------------------------------------------------------------------
    def owner_epoch(self, topic: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic, partition), -1)

    def release(self, member: ConsumerMember) -> None:
        """Forget what `member` owns (before its assignment changes, or when it goes)."""
        for assignment in (member.assigned, member.pending_revocation):
            for topic, parts in assignment.items():
                for p in parts:
                    if self.partition_owners.get((topic, p)) == member.member_id:
                        del self.partition_owners[(topic, p)]
                        self.partition_epochs.pop((topic, p), None)

    def claim(self, member: ConsumerMember) -> None:
        """Record what `member` owns now."""
        for assignment in (member.assigned, member.pending_revocation):
            for topic, parts in assignment.items():
                for p in parts:
                    self.partition_owners[(topic, p)] = member.member_id
                    self.partition_epochs[(topic, p)] = member.member_epoch

    # -- state ---------------------------------------------------------------------------------------
    def observe(self) -> Observation:
        if not self.members:
            return Observation.NO_MEMBERS
        if self.group_epoch > self.assignment_epoch:
            return Observation.EPOCH_BUMPED
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state is not MemberState.STABLE:
                return Observation.MEMBERS_RECONCILING
        return Observation.ALL_RECONCILED

    def refresh_state(self) -> None:
        self.state = next_state(self.state, self.observe())

    def remove(self) -> None:
        self.state = next_state(self.state, Observation.REMOVED)

    def subscribed_topic_names(self, topics: dict[str, tuple[uuid.UUID, int]],
                               resolve: dict[str, set[str]]) -> set[str]:
        """Every topic some member subscribes to, by name or through its regex (`resolve`: regex -> names)."""
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                names |= resolve.get(member.subscribed_topic_regex, set())
        return {name for name in names if name in topics}
