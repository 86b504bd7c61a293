"""The classic group coordinator's rules: joins, syncs, heartbeats, leaves, commits (plain and
transactional), deletes and timeouts.

Everything here runs on the event loop's thread and takes the time as an argument, so no call ever
sleeps and tests drive timeouts by passing a later `now`. Requests that must wait (a JoinGroup until the
join phase ends, a SyncGroup until the leader's assignment is on disk, a commit until it is fsynced)
hand in a callback that is called exactly once with the outcome. Writes go through a `GroupLog`; its
completion callback decides whether the change takes effect, so nothing is acknowledged before it is
durable. Rules follow Kafka's classic protocol; each decision names the error code clients react to.

Offset commits (plain and transactional), fetches, deletes and expiry are `OffsetCommits`
(`offset_commits.py`), which this class extends with membership.

Deadlines (sessions, pending members, join and sync phases) are timers, not a scan: each group has at
most one live entry in a heap, at or before the first time `tick` could act on it (`_deadline_of`).
Whatever can bring that time forward (a request on the group, a persisted assignment, a tick that acted)
calls `_schedule`, which pushes a new entry only when it is earlier than the group's live one; a
heartbeat, which only pushes deadlines later, pushes nothing: the stale entry fires, finds nothing due,
and the group is rescheduled at its real deadline. `tick(now)` visits only groups whose entry is due, so
it does what a scan of every group would do at `now`, at a cost that does not grow with idle groups;
`next_deadline()` says when to call it next, and `on_earlier_deadline` tells the timer when that moved
earlier.
"""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pybroker.broker.groups.consumer_coordinator import ConsumerGroups, TopicMetadata
from pybroker.broker.groups.consumer_records import group_tombstones as consumer_group_tombstones
from pybroker.broker.groups.consumer_snapshot import ConsumerUndo
from pybroker.broker.groups.expiry import keeps_alive, member_deadline
from pybroker.broker.groups.group import Group, Member
from pybroker.broker.groups.group_log import Done, GroupLog, Records, client_error
from pybroker.broker.groups.loading import GroupLoading
from pybroker.broker.groups.mixed_groups import MixedGroups
from pybroker.broker.groups.offset_commits import OffsetCommits
from pybroker.broker.groups.outcomes import (
    UNKNOWN_MEMBER_ID,
    JoinedMember,
    JoinOutcome,
    JoinRequest,
    SyncOutcome,
    SyncRequest,
    leaving_member_id,
)
from pybroker.broker.groups.placement import partition_for_group
from pybroker.broker.groups.state_machine import Event, GroupState
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.coordinator_records import (
    GroupMetadataValue,
    MemberMetadata,
)
from pybroker.protocol.offsets_topic_records import (
    group_metadata_key,
    group_metadata_value,
)

log = get_logger("pybroker.groups")


S = GroupState
@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    #: the consumer protocol (KIP-848): group.coordinator.rebalance.protocols lists "consumer"
    consumer_protocol_enabled: bool = True
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45_000
    consumer_max_size: int = 2**31 - 1
    #: server-side assignors by name, the first the default (group.consumer.assignors)
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: group.consumer.migration.policy: which online conversions are allowed
    consumer_migration_policy: str = "bidirectional"


def random_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class GroupCoordinator(ConsumerGroups, MixedGroups, OffsetCommits, GroupLoading):
    def __init__(self, config: GroupConfig, log: GroupLog, *,
                 partition_exists: Callable[[str, int], bool] = lambda topic, partition: True,
                 new_member_id: Callable[[str], str] = random_member_id,
                 topic_metadata: Callable[[], TopicMetadata] = dict) -> None:
        self.config = config
        self.log = log
        self.partition_exists = partition_exists
        self.new_member_id = new_member_id
        #: topic name -> (topic id, partition count), for the consumer protocol's assignments
        self.topic_metadata = topic_metadata
        self._regex_cache: dict[str, tuple[object, set[str]]] = {}
        #: undoes a consumer-group change whose records could not be written (consumer_snapshot.py)
        self.consumer_undo = ConsumerUndo()
        self.groups: dict[str, Group] = {}
        #: offsets-topic partitions whose groups are still being read from the log
        self.loading: set[int] = set()
        #: producer id -> the groups its open transaction committed offsets to (TxnOffsetCommit)
        self.txn_groups: dict[int, set[str]] = {}
        #: transaction completions for partitions still loading: applied once their replay is in
        self.deferred_completions: dict[int, list[tuple[int, bool]]] = {}
        #: (deadline, tie-breaker, group id): when `tick` must look at a group (module docstring)
        self._timers: list[tuple[int, int, str]] = []
        #: group id -> the deadline of its live heap entry (older, later entries are stale)
        self._scheduled: dict[str, int] = {}
        self._sequence = itertools.count()
        #: called with the new earliest deadline when one is scheduled before every other (the timer re-arms)
        self.on_earlier_deadline: Callable[[int], None] | None = None

    # -- placement and availability ----------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.config.num_partitions)

    def availability(self, group_id: str) -> ErrorCode:
        """INVALID_GROUP_ID for an empty id; COORDINATOR_LOAD_IN_PROGRESS while its partition loads."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if self.partition_for(group_id) in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    # -- JoinGroup ---------------------------------------------------------------------------------
    def join(self, req: JoinRequest, now: int, respond: Callable[[JoinOutcome], None]) -> None:
        try:
            self._join(req, now, respond)
        finally:
            self._schedule_id(req.group_id)

    def _join(self, req: JoinRequest, now: int, respond: Callable[[JoinOutcome], None]) -> None:
        error = self.availability(req.group_id)
        if error is ErrorCode.NONE and not (
                self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error is not ErrorCode.NONE:
            respond(JoinOutcome(error, member_id=req.member_id))
            return
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id != UNKNOWN_MEMBER_ID:
                respond(JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            group = Group(req.group_id, state_timestamp_ms=now)
            if group.supports(req.protocol_type, [name for name, _ in req.protocols]):
                self.groups[req.group_id] = group
        if group.is_(S.DEAD):
            respond(JoinOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id))
            return
        if group.consumer is not None:
            if group.consumer.members:  # a classic member in a consumer group (mixed_groups.py)
                self.classic_join_consumer_group(group, req, now, respond)
                return
            self.drop_consumer_part(group, now)
        if not group.supports(req.protocol_type, [name for name, _ in req.protocols]):
            respond(JoinOutcome(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
            return
        if req.member_id == UNKNOWN_MEMBER_ID:
            self._join_unknown_member(group, req, now, respond)
        else:
            self._join_known_member(group, req, now, respond)

    def _join_unknown_member(self, group: Group, req: JoinRequest, now: int,
                             respond: Callable[[JoinOutcome], None]) -> None:
        instance = req.group_instance_id
        if instance is not None and instance in group.static_members:
            self._rejoin_static_member(group, req, now, respond)
            return
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            respond(JoinOutcome(ErrorCode.GROUP_MAX_SIZE_REACHED))
            return
        member_id = self.new_member_id(req.client_id)
        if instance is None and req.require_known_member_id:
            group.pending_members[member_id] = now + req.session_timeout_ms
            respond(JoinOutcome(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
            return
        self._add_member_and_rebalance(group, req, member_id, now, respond)

    def _join_known_member(self, group: Group, req: JoinRequest, now: int,
                           respond: Callable[[JoinOutcome], None]) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._add_member_and_rebalance(group, req, member_id, now, respond)
            return
        fenced = self._fencing_error(group, member_id, req.group_instance_id)
        if fenced is not ErrorCode.NONE:
            respond(JoinOutcome(fenced, member_id=member_id))
            return
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, now, respond)
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.same_protocols(req.protocols):
                # a retried JoinGroup whose answer was lost: the same answer again
                respond(self._join_outcome(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, now, respond)
        elif group.is_(S.STABLE):
            if member_id == group.leader_id or not member.same_protocols(req.protocols):
                self._update_member_and_rebalance(group, member, req, now, respond)
            else:
                respond(self._join_outcome(group, member))
        else:  # Empty, Dead: no such member
            respond(JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _rejoin_static_member(self, group: Group, req: JoinRequest, now: int,
                              respond: Callable[[JoinOutcome], None]) -> None:
        """A static member came back with no member id (a restart): it takes over its old slot under a
        new id, and whoever still holds the old id is fenced."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        old = group.members.pop(old_id)
        _answer_join(old, JoinOutcome(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        _answer_sync(old, SyncOutcome(ErrorCode.FENCED_INSTANCE_ID))
        new_id = self.new_member_id(req.client_id)
        member = Member(new_id, req.group_instance_id, req.client_id, req.client_host, req.session_timeout_ms,
                        req.rebalance_timeout_ms, req.protocol_type, list(req.protocols), old.assignment,
                        last_heartbeat_ms=now)
        group.members[new_id] = member
        group.static_members[req.group_instance_id] = new_id
        was_leader = group.leader_id == old_id
        if was_leader:
            group.leader_id = new_id
        if group.is_(S.STABLE) and old.same_protocols(req.protocols):
            # nothing about the group changed: no rebalance, the member keeps its assignment (KIP-345)
            outcome = self._join_outcome(group, member)
            if was_leader:
                outcome = JoinOutcome(outcome.error, new_id, outcome.generation, outcome.protocol_type,
                                      outcome.protocol_name, outcome.leader, self._member_list(group),
                                      skip_assignment=True)
            self._persist_group(group, now, lambda _code: None)
            respond(outcome)
            return
        member.join_waiter = respond
        self._rebalance_or_complete(group, now)

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str, now: int,
                                  respond: Callable[[JoinOutcome], None]) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host, req.session_timeout_ms,
                        req.rebalance_timeout_ms, req.protocol_type, list(req.protocols), last_heartbeat_ms=now,
                        is_new=True, join_waiter=respond)
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        group.new_member_added = True
        self._rebalance_or_complete(group, now)

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest, now: int,
                                     respond: Callable[[JoinOutcome], None]) -> None:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.last_heartbeat_ms = now
        _answer_join(member, JoinOutcome(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_waiter = respond
        self._rebalance_or_complete(group, now)

    def _rebalance_or_complete(self, group: Group, now: int) -> None:
        if not group.is_(S.PREPARING_REBALANCE):
            self._prepare_rebalance(group, now)
        self._maybe_complete_join(group, now)

    # -- the join phase ----------------------------------------------------------------------------
    def _prepare_rebalance(self, group: Group, now: int) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            # assignments of the generation being formed are void: members waiting in SyncGroup rejoin
            for member in group.members.values():
                _answer_sync(member, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
        rebalance_timeout = group.rebalance_timeout_ms()
        if group.is_(S.EMPTY) and self.config.initial_rebalance_delay_ms > 0:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay_active = True
            group.initial_delay_remaining_ms = max(rebalance_timeout - delay, 0)
            group.new_member_added = False
            group.join_deadline_ms = now + delay
        else:
            group.initial_delay_active = False
            group.join_deadline_ms = now + rebalance_timeout
        group.transition(Event.REBALANCE_NEEDED, now)

    def _maybe_complete_join(self, group: Group, now: int) -> None:
        if group.is_(S.PREPARING_REBALANCE) and not group.initial_delay_active and group.all_members_joined():
            self._complete_join(group, now)

    def _complete_join(self, group: Group, now: int) -> None:
        """End the join phase: members that did not rejoin are out; the rest form the next generation."""
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            self._remove_member(group, member, "did not rejoin before the rebalance timeout")
        group.generation += 1
        group.initial_delay_active = False
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(Event.JOIN_COMPLETED_EMPTY, now)
            self._persist_group(group, now, lambda _code: None)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(Event.JOIN_COMPLETED, now)
        log.info("generation formed", group=group.group_id, generation=group.generation,
                 members=len(group.members), protocol=group.protocol_name, leader=group.leader_id)
        group.sync_deadline_ms = now + group.rebalance_timeout_ms()
        for member in group.members.values():
            member.is_new = False
            member.last_heartbeat_ms = now
            member.assignment = b""
            _answer_join(member, self._join_outcome(group, member))

    def _join_outcome(self, group: Group, member: Member) -> JoinOutcome:
        is_leader = member.member_id == group.leader_id
        return JoinOutcome(ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
                           group.protocol_name, group.leader_id or "",
                           self._member_list(group) if is_leader else [])

    @staticmethod
    def _member_list(group: Group) -> list[JoinedMember]:
        return [JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()]

    # -- SyncGroup ---------------------------------------------------------------------------------
    def sync(self, req: SyncRequest, now: int, respond: Callable[[SyncOutcome], None]) -> None:
        try:
            self._sync(req, now, respond)
        finally:
            self._schedule_id(req.group_id)

    def _sync(self, req: SyncRequest, now: int, respond: Callable[[SyncOutcome], None]) -> None:
        error = self.availability(req.group_id)
        group = self.groups.get(req.group_id)
        if error is ErrorCode.NONE and group is not None and group.consumer is not None:
            respond(self.classic_sync_consumer_group(group, req, now))
            return
        if error is ErrorCode.NONE:
            error = self._member_error(group, req.member_id, req.group_instance_id, req.generation)
        if error is ErrorCode.NONE:
            assert group is not None
            if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
                    req.protocol_name is not None and req.protocol_name != group.protocol_name):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            elif group.is_(S.PREPARING_REBALANCE):
                error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not ErrorCode.NONE:
            respond(SyncOutcome(error))
            return
        assert group is not None
        member = group.members[req.member_id]
        member.last_heartbeat_ms = now
        if group.is_(S.STABLE):
            respond(SyncOutcome(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            return
        # CompletingRebalance
        _answer_sync(member, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_waiter = respond
        if req.member_id != group.leader_id:
            return
        generation = group.generation
        assignments = {mid: req.assignments.get(mid, b"") for mid in group.members}

        def persisted(code: ErrorCode) -> None:
            if not group.is_(S.COMPLETING_REBALANCE) or group.generation != generation:
                return  # the group moved on while we wrote; that rebalance answered the waiters
            if code is not ErrorCode.NONE:
                for m in group.members.values():
                    _answer_sync(m, SyncOutcome(client_error(code)))
                self._prepare_rebalance(group, now)
                return
            for mid, m in group.members.items():
                m.assignment = assignments.get(mid, b"")
            group.transition(Event.ASSIGNMENT_PERSISTED, now)
            for m in group.members.values():
                _answer_sync(m, SyncOutcome(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                                            m.assignment))

        def persisted_then_schedule(code: ErrorCode) -> None:
            try:
                persisted(code)
            finally:  # members no longer waiting in SyncGroup count their sessions again
                self._schedule(group)

        self._persist_group(group, now, persisted_then_schedule, assignments)

    # -- Heartbeat and LeaveGroup ------------------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                  now: int) -> ErrorCode:
        error = self.availability(group_id)
        if error is not ErrorCode.NONE:
            return error
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None:
            return self.classic_heartbeat_consumer_group(group, member_id, generation, now, instance_id)
        error = self._member_error(group, member_id, instance_id, generation)
        if error is not ErrorCode.NONE:
            return error
        assert group is not None
        group.members[member_id].last_heartbeat_ms = now
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]], now: int
              ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (member id, instance id): the group's error, and one code per member."""
        try:
            return self._leave(group_id, leaving, now)
        finally:
            self._schedule_id(group_id)

    def _leave(self, group_id: str, leaving: list[tuple[str, str | None]], now: int
               ) -> tuple[ErrorCode, list[ErrorCode]]:
        error = self.availability(group_id)
        group = self.groups.get(group_id)
        if error is ErrorCode.NONE and (group is None or group.is_(S.DEAD)):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not ErrorCode.NONE:
            return error, [error] * len(leaving)
        assert group is not None
        if group.consumer is not None:
            return ErrorCode.NONE, self.classic_leave_consumer_group(group, leaving, now)
        codes: list[ErrorCode] = []
        removed = False
        for entry_id, instance_id in leaving:
            member_id = leaving_member_id(entry_id, instance_id, group.static_members)
            if isinstance(member_id, ErrorCode):
                codes.append(member_id)
                continue
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                codes.append(ErrorCode.NONE)
                removed = True
                continue
            member = group.members.get(member_id)
            if member is None:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            _answer_join(member, JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
            self._remove_member(group, member, "left the group")
            codes.append(ErrorCode.NONE)
            removed = True
        if removed:
            self._after_membership_shrank(group, now)
        return ErrorCode.NONE, codes

    def _after_membership_shrank(self, group: Group, now: int) -> None:
        if group.is_(S.STABLE) or group.is_(S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now)
        self._maybe_complete_join(group, now)

    @staticmethod
    def _remove_member(group: Group, member: Member, reason: str) -> None:
        log.info("member removed", group=group.group_id, member=member.member_id, reason=reason,
                 generation=group.generation)
        del group.members[member.member_id]
        if member.group_instance_id is not None and group.static_members.get(
                member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        _answer_sync(member, SyncOutcome(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _fencing_error(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is not None and holder != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _member_error(self, group: Group | None, member_id: str, instance_id: str | None,
                      generation: int) -> ErrorCode:
        """Kafka's checks for a request from a member: group, fencing, membership, generation."""
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        fenced = self._fencing_error(group, member_id, instance_id)
        if fenced is not ErrorCode.NONE:
            return fenced
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # -- timeouts ----------------------------------------------------------------------------------
    def tick(self, now: int) -> None:
        """Every deadline that has passed by `now`: join phases, sync phases, sessions, pending members.
        Only groups whose timer is due are visited (in the order a scan of every group would take)."""
        due: set[str] = set()
        timers = self._timers
        while timers and timers[0][0] <= now:
            deadline, _, group_id = heapq.heappop(timers)
            if self._scheduled.get(group_id) == deadline:
                del self._scheduled[group_id]
                due.add(group_id)
        if not due:
            return
        if len(due) == 1:
            found = self.groups.get(next(iter(due)))
            groups = [] if found is None else [found]
        else:
            groups = [g for g in self.groups.values() if g.group_id in due]
        for group in groups:
            try:
                self._tick_group(group, now)
            finally:
                self._schedule(group)

    def next_deadline(self) -> int | None:
        """When `tick` has something to do next (None: nothing is timed)."""
        timers = self._timers
        while timers and self._scheduled.get(timers[0][2]) != timers[0][0]:
            heapq.heappop(timers)  # stale: the group was rescheduled earlier, or is gone
        return timers[0][0] if timers else None

    def _schedule_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._schedule(group)

    def _schedule(self, group: Group) -> None:
        """Make sure the group's live timer is at or before the first time `tick` could act on it."""
        deadline = _deadline_of(group)
        consumer_deadline = self.consumer_deadline(group)
        if consumer_deadline is not None:
            deadline = consumer_deadline if deadline is None else min(deadline, consumer_deadline)
        if deadline is None:
            return
        current = self._scheduled.get(group.group_id)
        if current is not None and current <= deadline:
            return  # an earlier entry will fire first and reschedule
        earliest = self.next_deadline()
        self._scheduled[group.group_id] = deadline
        heapq.heappush(self._timers, (deadline, next(self._sequence), group.group_id))
        if (earliest is None or deadline < earliest) and self.on_earlier_deadline is not None:
            self.on_earlier_deadline(deadline)

    def _tick_group(self, group: Group, now: int) -> None:
        self.tick_consumer(group, now)
        self._expire_members(group, now)
        if group.is_(S.PREPARING_REBALANCE) and now >= group.join_deadline_ms:
            self._join_deadline_reached(group, now)
        elif group.is_(S.COMPLETING_REBALANCE) and now >= group.sync_deadline_ms:
            # members that never sent SyncGroup are gone; the others must rejoin
            for member in [m for m in group.members.values() if m.sync_waiter is None]:
                self._remove_member(group, member, "did not sync before the rebalance timeout")
            self._prepare_rebalance(group, now)
            self._maybe_complete_join(group, now)

    def _join_deadline_reached(self, group: Group, now: int) -> None:
        if group.initial_delay_active and group.new_member_added and group.initial_delay_remaining_ms > 0:
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= delay
            group.new_member_added = False
            group.join_deadline_ms = now + delay
            return
        self._complete_join(group, now)

    def _expire_members(self, group: Group, now: int) -> None:
        expired_pending = [mid for mid, deadline in group.pending_members.items() if now >= deadline]
        for mid in expired_pending:
            del group.pending_members[mid]
        expired = [m for m in group.members.values() if not keeps_alive(m, now)]
        for member in expired:
            _answer_join(member, JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
            self._remove_member(group, member, "session timed out")
        if expired or expired_pending:
            self._after_membership_shrank(group, now)

    # -- listing, describing, deleting -------------------------------------------------------------
    def list_groups(self) -> list[Group]:
        loaded = [g for g in self.groups.values()
                  if not g.is_(S.DEAD) and self.partition_for(g.group_id) not in self.loading]
        return sorted(loaded, key=lambda g: g.group_id)

    def describe(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        error = self.availability(group_id)
        if error is not ErrorCode.NONE:
            return error, None
        group = self.groups.get(group_id)
        return ErrorCode.NONE, group if group is not None and not group.is_(S.DEAD) else None

    def delete_groups(self, group_ids: list[str], now: int,
                      respond: Callable[[dict[str, ErrorCode]], None]) -> None:
        codes: dict[str, ErrorCode] = {}
        waiting: set[str] = set()

        def finish(group_id: str, code: ErrorCode) -> None:
            codes[group_id] = client_error(code)
            waiting.discard(group_id)
            if not waiting and len(codes) == len(set(group_ids)):
                respond(codes)

        pending: list[tuple[Group, Records]] = []
        for group_id in dict.fromkeys(group_ids):
            error = self.availability(group_id)
            group = self.groups.get(group_id)
            if error is ErrorCode.NONE and (group is None or group.is_(S.DEAD)):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            if error is ErrorCode.NONE and group is not None and (not group.is_(S.EMPTY) or group.has_members):
                error = ErrorCode.NON_EMPTY_GROUP
            if error is not ErrorCode.NONE or group is None:
                codes[group_id] = error
                continue
            # tombstones for the committed offsets and for those open transactions committed (Kafka's)
            records = self._offset_tombstones(group_id, {*group.offsets, *group.pending_txn_keys()})
            records.append((group_metadata_key(group_id), None))
            if group.consumer is not None:
                records += consumer_group_tombstones(group_id, group.consumer)
                group.consumer.remove()
            group.transition(Event.REMOVED, now)
            group.offsets.clear()
            group.pending_txn.clear()
            del self.groups[group_id]
            waiting.add(group_id)
            pending.append((group, records))
        if not pending:
            respond(codes)
            return
        for group, records in pending:
            self.log.append(self.partition_for(group.group_id), records, now, partial(finish, group.group_id))

    # -- persistence -------------------------------------------------------------------------------
    def _persist_group(self, group: Group, now: int, done: Done, assignments: dict[str, bytes] | None = None
                       ) -> None:
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation, protocol=group.protocol_name,
            leader=group.leader_id, current_state_timestamp=now,
            members=[MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms, subscription=m.metadata_for(group.protocol_name),
                assignment=(assignments or {}).get(m.member_id, m.assignment))
                for m in group.members.values()])
        record = (group_metadata_key(group.group_id), group_metadata_value(value))
        self.log.append(self.partition_for(group.group_id), [record], now, done)

    def shutdown(self) -> None:
        """Answer every waiting JoinGroup and SyncGroup: this broker stops coordinating (clients look again)."""
        for group in self.groups.values():
            for member in group.members.values():
                _answer_join(member, JoinOutcome(ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
                _answer_sync(member, SyncOutcome(ErrorCode.NOT_COORDINATOR))


def _answer_join(member: Member, outcome: JoinOutcome) -> None:
    waiter, member.join_waiter = member.join_waiter, None
    if waiter is not None:
        waiter(outcome)


def _answer_sync(member: Member, outcome: SyncOutcome) -> None:
    waiter, member.sync_waiter = member.sync_waiter, None
    if waiter is not None:
        waiter(outcome)


def _deadline_of(group: Group) -> int | None:
    """The first `now` at which `tick` would act on the group as it stands: a pending member's deadline,
    a member's (`member_deadline`), or the deadline of the phase the group is in."""
    deadlines = [d for d in map(member_deadline, group.members.values()) if d is not None]
    deadlines.extend(group.pending_members.values())
    if group.is_(S.PREPARING_REBALANCE):
        deadlines.append(group.join_deadline_ms)
    elif group.is_(S.COMPLETING_REBALANCE):
        deadlines.append(group.sync_deadline_ms)
    return min(deadlines, default=None)
