"""What the coordinator is asked and what it answers, independent of any wire version.

Handlers turn a versioned request into one of these and the answer back into a versioned response, so
the coordinator's rules are written once for every version of every API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pybroker.protocol.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""


def leaving_member_id(member_id: str, instance_id: str | None, static_members: Mapping[str, str]) -> str | ErrorCode:
    """The member a LeaveGroup entry names (KIP-345), in a classic or a consumer group alike: with an
    instance id, that instance's current member (an admin's removal names no member id), UNKNOWN_MEMBER_ID
    when the instance has none and FENCED_INSTANCE_ID when the entry's member id is another one; without
    one, the member id itself."""
    if instance_id is None:
        return member_id
    holder = static_members.get(instance_id)
    if holder is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_id != UNKNOWN_MEMBER_ID and member_id != holder:
        return ErrorCode.FENCED_INSTANCE_ID
    return holder


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    #: v4+: a new member must first be handed its id (MEMBER_ID_REQUIRED) and join again with it
    require_known_member_id: bool


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinOutcome:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    #: the leader alone gets every member's metadata for the chosen protocol
    members: list[JoinedMember] = field(default_factory=list)
    #: v9: a static leader that rejoined without change must not compute a new assignment
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    #: OffsetCommit v1 may carry an explicit commit time (-1: the broker's clock)
    commit_timestamp: int = -1
    #: OffsetCommit v2-4's retention time made absolute (-1: the broker's retention rules)
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None
    offsets: list[OffsetToCommit]
    #: the OffsetCommit version (a consumer-protocol member must commit with v9+)
    api_version: int = 9


@dataclass(frozen=True, slots=True)
class TxnCommitRequest:
    """TxnOffsetCommit: offsets a transaction commits, pending until the transaction's marker."""

    group_id: str
    producer_id: int
    producer_epoch: int
    #: v3+; -1, "" and None before (a transactional commit from outside group management)
    generation: int
    member_id: str
    group_instance_id: str | None
    offsets: list[OffsetToCommit]
