"""A classic group's states and the events that move it between them, as one table.

Kafka's classic protocol: a group is Empty until a member joins; a join (or a leave, or a member
timing out) starts PreparingRebalance, in which members rejoin; when the join phase completes the group
waits in CompletingRebalance for the leader's assignment; once that assignment is on disk it is
Stable. A group whose members are all gone returns to Empty; a deleted group, or one whose last offset
expired, is Dead. `next_state` is a pure function of (state, event): the coordinator decides which
event happened, this table decides where that leads, and a pair missing from it is a bug, not a
client error, so it raises.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum, StrEnum

from pybroker.broker.coordinator.state_tables import IllegalTransition as IllegalTransition
from pybroker.broker.coordinator.state_tables import state_table


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Event(Enum):
    #: a member joined or rejoined with new metadata, left, or was expired: everyone must rejoin
    REBALANCE_NEEDED = "rebalance needed"
    #: the join phase ended with members: a generation was formed
    JOIN_COMPLETED = "join completed"
    #: the join phase ended with nobody left
    JOIN_COMPLETED_EMPTY = "join completed empty"
    #: the leader's assignment was written to the log
    ASSIGNMENT_PERSISTED = "assignment persisted"
    #: the group was loaded from the log with a generation of members
    LOADED_STABLE = "loaded stable"
    #: the group was deleted, or its last committed offset expired
    REMOVED = "removed"


S = GroupState
E = Event

TRANSITIONS: dict[tuple[GroupState, Event], GroupState] = {
    (S.EMPTY, E.REBALANCE_NEEDED): S.PREPARING_REBALANCE,
    (S.STABLE, E.REBALANCE_NEEDED): S.PREPARING_REBALANCE,
    (S.COMPLETING_REBALANCE, E.REBALANCE_NEEDED): S.PREPARING_REBALANCE,
    (S.PREPARING_REBALANCE, E.REBALANCE_NEEDED): S.PREPARING_REBALANCE,
    (S.PREPARING_REBALANCE, E.JOIN_COMPLETED): S.COMPLETING_REBALANCE,
    (S.PREPARING_REBALANCE, E.JOIN_COMPLETED_EMPTY): S.EMPTY,
    (S.COMPLETING_REBALANCE, E.ASSIGNMENT_PERSISTED): S.STABLE,
    (S.EMPTY, E.LOADED_STABLE): S.STABLE,
    (S.EMPTY, E.REMOVED): S.DEAD,
    (S.PREPARING_REBALANCE, E.REMOVED): S.DEAD,
    (S.COMPLETING_REBALANCE, E.REMOVED): S.DEAD,
    (S.STABLE, E.REMOVED): S.DEAD,
    (S.DEAD, E.REMOVED): S.DEAD,
}


next_state: Callable[[GroupState, Event], GroupState] = state_table(TRANSITIONS)
