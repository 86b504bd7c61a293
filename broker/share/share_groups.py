"""Share group membership (KIP-932): ShareGroupHeartbeat's join, heartbeat and leave, and session expiry.

A share group's members do not own partitions: a share-partition is read by every member it is assigned
to, and records are handed out one by one by the share-partition (`share_partition.py`). So there is no
revocation and no reconciliation: the target assignment is computed by Kafka's simple assignor
(`share_assignor.py`: each partition to ceil(members / partitions) members, members' counts within one
of each other, what a member held kept where balance allows) from the members' subscriptions, the topics
that exist and the last assignment. A member's epoch follows the group epoch, which moves whenever the
membership, a subscription or an assignment changes, and a member's epoch is brought to the group's in
its own heartbeat's answer (never behind its back, so its next heartbeat is not fenced); the answer
carries the assignment when it differs from the last one the member was sent. A heartbeat with the
member's previous epoch is accepted, as Kafka accepts it (the answer that moved it may have been lost).

Group ids are shared with consumer and classic groups: the caller refuses an id that names a group of
another type (`GROUP_ID_NOT_FOUND`, as Kafka answers).

Threads: the event loop only.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from pybroker.broker.share import share_assignor
from pybroker.broker.share.config import ShareConfig
from pybroker.protocol.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
#: the longest member id accepted (Kafka's clients send a 22-character UUID)
MAX_MEMBER_ID_CHARS = 36
#: most topics one member may subscribe to
MAX_SUBSCRIBED_TOPICS = 10_000

#: topic id -> its partitions
Assignment = dict[uuid.UUID, frozenset[int]]
#: what the assignor needs of the topics: a name -> (its id, its partition count), or None when it does not exist
TopicLookup = Callable[[str], tuple[uuid.UUID, int] | None]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    deadline_ms: int
    #: the member's target assignment (ShareGroupTargetAssignmentMember records)
    assignment: Assignment = field(default_factory=dict)
    #: the assignment the member was last answered (None: never); with its epochs, the member's current
    #: assignment (ShareGroupCurrentMemberAssignment records)
    sent: Assignment | None = None
    #: the epoch before the last move: a heartbeat with it is accepted (Kafka's rule)
    previous_member_epoch: int = 0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    #: the hash of the subscribed topics' partition counts the assignment was computed from
    metadata_hash: int = 0
    #: topic id -> (name, partitions) whose share-partitions the group has been assigned (kept across
    #: members leaving, as Kafka's initialized topics are; dropped by DeleteShareGroupOffsets)
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's share group states: Empty or Stable (assignments never wait on anyone)."""
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed}


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: the member's assignment when it changed since the last answer, else None
    assignment: Assignment | None = None
    #: a member that left or was removed: the share-partitions release what it held
    departed: str | None = None


class ShareGroups:
    """Every share group of the broker, with the members' session deadlines."""

    def __init__(self, config: ShareConfig, topics: TopicLookup) -> None:
        self.config = config
        self.topics = topics
        self.groups: dict[str, ShareGroup] = {}

    def get(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def ensure(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        return group

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed: list[str] | None, client_id: str, client_host: str, now_ms: int) -> HeartbeatOutcome:
        if not group_id:
            return HeartbeatOutcome(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id or len(member_id) > MAX_MEMBER_ID_CHARS:
            return HeartbeatOutcome(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if subscribed is not None and len(subscribed) > MAX_SUBSCRIBED_TOPICS:
            return HeartbeatOutcome(ErrorCode.INVALID_REQUEST, "Too many subscribed topics.")
        if member_epoch == LEAVE_EPOCH:
            return self._leave(group_id, member_id)
        if member_epoch < LEAVE_EPOCH:
            return HeartbeatOutcome(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch == JOIN_EPOCH:
            if not subscribed:
                return HeartbeatOutcome(ErrorCode.INVALID_REQUEST,
                                        "SubscribedTopicNames must be set in first request.")
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            if member is None and len(group.members) >= self.config.max_size:
                return HeartbeatOutcome(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                        f"The share group has reached its maximum capacity of "
                                        f"{self.config.max_size} members.")
            if member is None:
                member = group.members[member_id] = ShareMember(
                    member_id, 0, client_id, client_host, rack_id, tuple(dict.fromkeys(subscribed)), 0)
                group.epoch += 1
            member.sent = None  # a (re)join is always answered its assignment
        elif member is None:
            return HeartbeatOutcome(ErrorCode.UNKNOWN_MEMBER_ID,
                                    f"Member {member_id} is not a member of group {group_id}.")
        elif member_epoch > member.member_epoch:
            return HeartbeatOutcome(ErrorCode.FENCED_MEMBER_EPOCH,
                                    f"The share group member has a greater member epoch ({member_epoch}) than "
                                    f"the one known by the group coordinator ({member.member_epoch}). The member "
                                    f"must abandon all its partitions and rejoin.")
        elif member_epoch < member.member_epoch:
            # Kafka's rule: the previous epoch is accepted (the answer that moved it may have been lost, in a
            # crash after the records were fsynced, say) and is answered the assignment again
            if member_epoch != member.previous_member_epoch:
                return HeartbeatOutcome(ErrorCode.FENCED_MEMBER_EPOCH,
                                        f"The share group member has a smaller member epoch ({member_epoch}) than "
                                        f"the one known by the group coordinator ({member.member_epoch}). The "
                                        f"member must abandon all its partitions and rejoin.")
            member.sent = None
        assert group is not None
        if subscribed is not None and tuple(dict.fromkeys(subscribed)) != member.subscribed:
            member.subscribed = tuple(dict.fromkeys(subscribed))
            group.epoch += 1
        if rack_id is not None:
            member.rack_id = rack_id
        member.deadline_ms = now_ms + self.config.session_timeout_ms
        self._assign(group)
        if member.member_epoch != group.epoch:  # a member's epoch moves only in its own heartbeat's answer
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.epoch
        if client_id != member.client_id or client_host != member.client_host:
            member.client_id, member.client_host = client_id, client_host
        changed = member.sent != member.assignment
        if changed:
            member.sent = dict(member.assignment)
        return HeartbeatOutcome(ErrorCode.NONE, None, member_id, member.member_epoch,
                                self.config.heartbeat_interval_ms, dict(member.assignment) if changed else None)

    def _assign(self, group: ShareGroup) -> None:
        """Kafka's simple assignor shares the subscribed partitions among the members (`share_assignor`);
        a change moves the epochs."""
        changed = False
        digest = hashlib.blake2b(digest_size=8)
        for name in sorted(group.subscribed_topics()):
            found = self.topics(name)
            digest.update(f"{name}\0{found[1] if found is not None else -1}\n".encode())
        metadata_hash = int.from_bytes(digest.digest(), "big", signed=True)
        subscriptions: dict[str, list[uuid.UUID]] = {}
        counts: dict[uuid.UUID, int] = {}
        for member in group.members.values():
            ids = subscriptions[member.member_id] = []
            for name in member.subscribed:
                found = self.topics(name)
                if found is not None and found[1] > 0:
                    ids.append(found[0])
                    counts[found[0]] = found[1]
                    parts = frozenset(range(found[1]))
                    known = group.initialized.get(found[0])
                    if known is None or not parts <= known[1]:
                        group.initialized[found[0]] = (name, parts | (known[1] if known else frozenset()))
        targets = share_assignor.assign(subscriptions, counts,
                                        {m.member_id: m.assignment for m in group.members.values()})
        for member in group.members.values():
            target = targets[member.member_id]
            if target != member.assignment:
                member.assignment = target
                changed = True
        group.metadata_hash = metadata_hash  # what moved it (a subscription, a partition count) moved the epoch
        if changed:
            group.epoch += 1
        group.assignment_epoch = group.epoch

    def _leave(self, group_id: str, member_id: str) -> HeartbeatOutcome:
        group = self.groups.get(group_id)
        if group is None or group.members.pop(member_id, None) is None:
            return HeartbeatOutcome(ErrorCode.UNKNOWN_MEMBER_ID,
                                    f"Member {member_id} is not a member of group {group_id}.")
        group.epoch += 1
        self._assign(group)
        return HeartbeatOutcome(ErrorCode.NONE, None, member_id, LEAVE_EPOCH, 0, None, departed=member_id)

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove members past their session deadline; returns (group id, member id) of each."""
        gone: list[tuple[str, str]] = []
        for group in self.groups.values():
            for member in list(group.members.values()):
                if member.deadline_ms <= now_ms:
                    del group.members[member.member_id]
                    gone.append((group.group_id, member.member_id))
            if any(g == group.group_id for g, _ in gone):
                group.epoch += 1
                self._assign(group)
        return gone

    def next_deadline(self) -> int | None:
        return min((m.deadline_ms for g in self.groups.values() for m in g.members.values()), default=None)

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        return ErrorCode.NONE
