"""A consumer-protocol group's states (KIP-848) and what moves it between them, as one table.

The classic protocol's table is `state_machine.py`; this is the consumer protocol's own. A consumer
group has no join or sync phase: its state follows from what the coordinator observes after every change.
No members: Empty. The group epoch is ahead of the target assignment's epoch: Assigning (a new target is
being computed). Some member is not yet at the target epoch, or still has partitions to revoke or to
receive: Reconciling. Everyone at the target: Stable. A deleted group, or one whose last offset expired,
is Dead. `observe` names what the coordinator sees; `next_state` says where that leads from where the
group is, and a pair missing from the table is a bug, not a client error, so it raises.

Each member has its own small table too (Kafka's MemberState): Stable at the target; UnrevokedPartitions
while it must give partitions up before going on; UnreleasedPartitions while partitions of its target are
still owned by another member.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum, IntEnum, StrEnum

from pybroker.broker.coordinator.state_tables import IllegalTransition, state_table


class ConsumerGroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class Observation(Enum):
    #: the last member left, or was fenced
    NO_MEMBERS = "no members"
    #: the group epoch moved past the target assignment's epoch
    EPOCH_BUMPED = "epoch bumped"
    #: a new target exists and some member has not reached it
    MEMBERS_RECONCILING = "members reconciling"
    #: every member is at the target
    ALL_RECONCILED = "all reconciled"
    #: the group was deleted, or its offsets expired
    REMOVED = "removed"


S = ConsumerGroupState
O = Observation  # noqa: E741

#: every state may observe every condition except after Dead; listed in full so the table is the spec
TRANSITIONS: dict[tuple[ConsumerGroupState, Observation], ConsumerGroupState] = {
    **{(state, O.NO_MEMBERS): S.EMPTY for state in (S.EMPTY, S.ASSIGNING, S.RECONCILING, S.STABLE)},
    **{(state, O.EPOCH_BUMPED): S.ASSIGNING for state in (S.EMPTY, S.ASSIGNING, S.RECONCILING, S.STABLE)},
    **{(state, O.MEMBERS_RECONCILING): S.RECONCILING
       for state in (S.EMPTY, S.ASSIGNING, S.RECONCILING, S.STABLE)},
    **{(state, O.ALL_RECONCILED): S.STABLE for state in (S.EMPTY, S.ASSIGNING, S.RECONCILING, S.STABLE)},
    **{(state, O.REMOVED): S.DEAD for state in (S.EMPTY, S.ASSIGNING, S.RECONCILING, S.STABLE, S.DEAD)},
}


class IllegalConsumerTransition(IllegalTransition):
    pass


next_state: Callable[[ConsumerGroupState, Observation], ConsumerGroupState] = state_table(
    TRANSITIONS, error=IllegalConsumerTransition)


class MemberState(IntEnum):
    """Kafka's MemberState codes, as written in ConsumerGroupCurrentMemberAssignmentValue.State."""

    UNREVOKED_PARTITIONS = 0
    UNRELEASED_PARTITIONS = 1
    STABLE = 2
    UNKNOWN = 127


class MemberEvent(Enum):
    #: the target asks the member to give partitions up (it stays at its epoch until it has)
    MUST_REVOKE = "must revoke"
    #: the member reached the target epoch, but some target partitions are still owned by others
    WAITS_FOR_RELEASE = "waits for release"
    #: the member reached the target epoch with every partition of its target
    REACHED_TARGET = "reached target"


M = MemberState
ME = MemberEvent

MEMBER_TRANSITIONS: dict[tuple[MemberState, MemberEvent], MemberState] = {
    **{(state, ME.MUST_REVOKE): M.UNREVOKED_PARTITIONS
       for state in (M.STABLE, M.UNREVOKED_PARTITIONS, M.UNRELEASED_PARTITIONS)},
    **{(state, ME.WAITS_FOR_RELEASE): M.UNRELEASED_PARTITIONS
       for state in (M.STABLE, M.UNREVOKED_PARTITIONS, M.UNRELEASED_PARTITIONS)},
    **{(state, ME.REACHED_TARGET): M.STABLE
       for state in (M.STABLE, M.UNREVOKED_PARTITIONS, M.UNRELEASED_PARTITIONS)},
}


next_member_state: Callable[[MemberState, MemberEvent], MemberState] = state_table(
    MEMBER_TRANSITIONS, what="member transition", error=IllegalConsumerTransition)
