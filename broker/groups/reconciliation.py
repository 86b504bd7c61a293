"""How a member's current assignment moves towards its target (Kafka's CurrentAssignmentBuilder).

Pure: given the member as it stands, the target (epoch and partitions), who owns what in the group, and
what the member says it owns in this heartbeat, `reconcile` returns the member's next epoch, state and
partitions. The safety rule: a partition reaches a member only once no other member holds it (assigned,
or pending revocation); a member asked to revoke stays at its epoch, in UnrevokedPartitions, until its
heartbeat no longer lists those partitions as owned. So no partition is ever given to two members.
`assignment_epochs` carries, across a step, the epoch at which the member got each partition it holds
(KIP-1251: a commit at an older member epoch is accepted for partitions held since that epoch).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pybroker.broker.groups.consumer_group import Assignment, ConsumerMember, without_empty
from pybroker.broker.groups.consumer_state_machine import MemberEvent, MemberState, next_member_state


@dataclass(frozen=True, slots=True)
class Reconciled:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def _still_owns(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member may still hold any of `partitions` (an unknown owned list: assume it does)."""
    if owned is None:
        return True
    return any(owned.get(topic, frozenset()) & parts for topic, parts in partitions.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              owner_epoch: Callable[[uuid.UUID, int], int], owned: Assignment | None) -> Reconciled:
    """The member's next step; `owner_epoch(topic, p)` is -1 for a partition nobody owns (the member's own
    partitions must already have been released from the group's map by the caller)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return _unchanged(member)
        return _next(member, member.member_epoch, target_epoch, target, owner_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.pending_revocation):
            return _unchanged(member)
        return _next(member, member.member_epoch + 1, target_epoch, target, owner_epoch, owned)
    return _next(member, member.member_epoch, target_epoch, target, owner_epoch, owned)


def _unchanged(member: ConsumerMember) -> Reconciled:
    return Reconciled(member.member_epoch, member.previous_member_epoch, member.state, member.assigned,
                      member.pending_revocation)


def _next(member: ConsumerMember, epoch: int, target_epoch: int, target: Assignment,
          owner_epoch: Callable[[uuid.UUID, int], int], owned: Assignment | None) -> Reconciled:
    keep: Assignment = {}
    revoke: Assignment = {}
    gain: Assignment = {}
    unreleased = False
    for topic in member.assigned.keys() | target.keys():
        current = member.assigned.get(topic, frozenset())
        wanted = target.get(topic, frozenset())
        keep[topic] = current & wanted
        revoke[topic] = current - wanted
        free = frozenset(p for p in wanted - current if owner_epoch(topic, p) == -1)
        unreleased = unreleased or len(free) < len(wanted - current)
        gain[topic] = free
    keep, revoke, gain = without_empty(keep), without_empty(revoke), without_empty(gain)

    def moved(new_epoch: int) -> int:
        return member.member_epoch if new_epoch != member.member_epoch else member.previous_member_epoch

    if revoke and _still_owns(owned, revoke):
        state = next_member_state(member.state, MemberEvent.MUST_REVOKE)
        return Reconciled(epoch, moved(epoch), state, keep, revoke)
    if gain:
        merged = {topic: keep.get(topic, frozenset()) | gain.get(topic, frozenset()) for topic in keep.keys() | gain.keys()}
        event = MemberEvent.WAITS_FOR_RELEASE if unreleased else MemberEvent.REACHED_TARGET
        return Reconciled(target_epoch, moved(target_epoch), next_member_state(member.state, event), merged, {})
    event = MemberEvent.WAITS_FOR_RELEASE if unreleased else MemberEvent.REACHED_TARGET
    return Reconciled(target_epoch, moved(target_epoch), next_member_state(member.state, event), keep, {})


def assignment_epochs(member: ConsumerMember, step: Reconciled) -> dict[tuple[uuid.UUID, int], int]:
    """The epoch at which the member got each partition it holds after `step` (assigned or pending
    revocation): a partition it held before keeps its epoch, a new one takes the step's member epoch."""
    epochs: dict[tuple[uuid.UUID, int], int] = {}
    for assignment in (step.assigned, step.pending_revocation):
        for topic, parts in assignment.items():
            held = member.assigned.get(topic, frozenset()) | member.pending_revocation.get(topic, frozenset())
            for p in parts:
                key = (topic, p)
                epochs[key] = member.assignment_epochs.get(key, member.member_epoch) if p in held \
                    else step.member_epoch
    return epochs
