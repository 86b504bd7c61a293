"""A classic group as the coordinator holds it: members, generation, chosen protocol, committed offsets,
and the offsets open transactions committed (pending until their transaction's marker).

Plain data plus small queries; every decision (who joins, when a phase ends) lives in the coordinator,
and every state change goes through `Group.transition`, i.e. through the state machine's table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pybroker.broker.groups.consumer_group import ConsumerGroupData
from pybroker.broker.groups.state_machine import Event, GroupState, next_state
from pybroker.broker.groups.subscriptions import topics_of_subscription

if TYPE_CHECKING:
    from pybroker.broker.streams_groups.group import StreamsGroupData


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    #: where the record holding it sits in `__consumer_offsets` (-1: unknown). Kafka's rule when a
    #: transaction commits: of a pending and a committed offset, the one written later wins.
    record_offset: int = -1


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's order of preference
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat_ms: int = 0
    #: joined during this rebalance and never part of a generation (Kafka's "new member")
    is_new: bool = False
    join_waiter: Callable[[Any], None] | None = None
    sync_waiter: Callable[[Any], None] | None = None

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    def session_deadline_ms(self) -> int:
        return self.last_heartbeat_ms + self.session_timeout_ms

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: member ids handed out with MEMBER_ID_REQUIRED -> the time they must rejoin by
    pending_members: dict[str, int] = field(default_factory=dict)
    #: group.instance.id -> the member id that instance currently holds
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    #: producer id -> offsets its open transaction committed (TxnOffsetCommit), visible only once
    #: the transaction commits; an abort drops them
    pending_txn: dict[int, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    #: when the join phase ends at the latest
    join_deadline_ms: int = 0
    #: the initial delay (group.initial.rebalance.delay.ms) of a group rebalancing from Empty
    initial_delay_active: bool = False
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False
    #: when members that have not sent SyncGroup are dropped (CompletingRebalance only)
    sync_deadline_ms: int = 0
    #: a group of the consumer protocol (KIP-848): its membership; None for a classic group
    consumer: ConsumerGroupData | None = None
    #: a streams group (KIP-1071, broker/streams_groups/): its membership; None for the other protocols
    streams: StreamsGroupData | None = None

    @property
    def group_type(self) -> str:
        """Kafka's group type, as ListGroups v5 shows it."""
        if self.streams is not None:
            return "streams"
        return "classic" if self.consumer is None else "consumer"

    @property
    def state_name(self) -> str:
        """The state as Kafka names it for this group's protocol."""
        if self.streams is not None:
            return self.streams.state.value
        return self.state.value if self.consumer is None else self.consumer.state.value

    @property
    def has_members(self) -> bool:
        """Whether anyone is in the group, under any protocol (an empty group's offsets may expire)."""
        return bool(self.members) or (self.consumer is not None and bool(self.consumer.members)) or \
            (self.streams is not None and bool(self.streams.members))

    def transition(self, event: Event, now_ms: int) -> None:
        self.state = next_state(self.state, event)
        self.state_timestamp_ms = now_ms

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = {name for name, _ in first.protocols}
        for member in members:
            common &= {name for name, _ in member.protocols}
        return common

    def supports(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """Whether a member with these protocols may join (INCONSISTENT_GROUP_PROTOCOL otherwise)."""
        if not protocol_type or not protocol_names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(protocol_names))

    def select_protocol(self) -> str:
        """The common protocol most members list first among the candidates (ties: the earliest member's order)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        order = [name for name, _ in first.protocols if name in candidates]
        return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_waiter is not None for m in self.members.values())

    def has_pending_txn_offset(self, key: tuple[str, int]) -> bool:
        return any(key in offsets for offsets in self.pending_txn.values())

    def pending_txn_keys(self) -> set[tuple[str, int]]:
        return {key for offsets in self.pending_txn.values() for key in offsets}

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """End a producer's transaction: on commit its offsets become the committed ones where they
        were written after what is committed now (Kafka's rule); on abort they are dropped. Returns
        how many offsets became visible."""
        pending = self.pending_txn.pop(producer_id, None)
        if not pending or not commit:
            return 0
        applied = 0
        for key, offset in pending.items():
            current = self.offsets.get(key)
            if current is None or offset.record_offset > current.record_offset:
                self.offsets[key] = offset
                applied += 1
        return applied

    def forget_offset(self, key: tuple[str, int]) -> None:
        """A tombstone for `key`: its committed offset and every transaction's pending one are gone."""
        self.offsets.pop(key, None)
        for offsets in self.pending_txn.values():
            offsets.pop(key, None)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members of a consumer group subscribe to; None when they cannot be known."""
        if self.consumer is not None:
            return set(self.consumer.subscription_metadata)
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = topics_of_subscription(member.metadata_for(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics
