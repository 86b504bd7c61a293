"""The classic protocol's rules (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): one part of the group coordinator.

Joins, syncs, heartbeats, leaves, the join and sync phases and their deadlines, and the group metadata
record each generation writes. Rules follow Kafka's classic protocol; each decision names the error code
clients react to. Requests that must wait (a JoinGroup until the join phase ends, a SyncGroup until the
leader's assignment is on disk) hand in a callback that is called exactly once with the outcome; writes go
through the store's `GroupLog` and the completion callback decides whether the change takes effect.

A classic request on a group run by the consumer protocol goes to the mixed-groups part (`mixed`); an
empty consumer group a classic JoinGroup takes over drops its consumer part (`consumer`). The coordinator
(`coordinator.GroupCoordinator`) hands both in, with the store and the timers, and dispatches the group's
due deadlines here (`tick_group`). Everything runs on the event loop's thread and takes the time as an
argument, so no call ever sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pybroker.broker.groups.expiry import keeps_alive, member_deadline
from pybroker.broker.groups.group import Group, Member
from pybroker.broker.groups.group_log import Done, client_error
from pybroker.broker.groups.group_store import GroupStore
from pybroker.broker.groups.group_timers import GroupTimers
from pybroker.broker.groups.outcomes import (
    UNKNOWN_MEMBER_ID,
    JoinedMember,
    JoinOutcome,
    JoinRequest,
    SyncOutcome,
    SyncRequest,
    leaving_member_id,
)
from pybroker.broker.groups.state_machine import Event, GroupState
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.coordinator_records import GroupMetadataValue, MemberMetadata
from pybroker.protocol.offsets_topic_records import group_metadata_key, group_metadata_value

if TYPE_CHECKING:
    from pybroker.broker.groups.consumer_groups import ConsumerGroups
    from pybroker.broker.groups.mixed_groups import MixedGroups

log = get_logger("pybroker.groups")

S = GroupState


class ClassicGroups:
    def __init__(self, store: GroupStore, timers: GroupTimers) -> None:
        self.store = store
        self.timers = timers
        #: the other parts this one hands requests to (set by the coordinator once they exist)
        self.mixed: MixedGroups
        self.consumer: ConsumerGroups

    # -- JoinGroup ---------------------------------------------------------------------------------
    def join(self, req: JoinRequest, now: int, respond: Callable[[JoinOutcome], None]) -> None:
        try:
            self._join(req, now, respond)
        finally:
            self.timers.schedule_id(req.group_id)

    def _join(self, req: JoinRequest, now: int, respond: Callable[[JoinOutcome], None]) -> None:
        error = self.store.availability(req.group_id)
        config = self.store.config
        if error is ErrorCode.NONE and not (
                config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error is not ErrorCode.NONE:
            respond(JoinOutcome(error, member_id=req.member_id))
            return
        group = self.store.groups.get(req.group_id)
        if group is None:
            if req.member_id != UNKNOWN_MEMBER_ID:
                respond(JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            group = Group(req.group_id, state_timestamp_ms=now)
            if group.supports(req.protocol_type, [name for name, _ in req.protocols]):
                self.store.groups[req.group_id] = group
        if group.is_(S.DEAD):
            respond(JoinOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id))
            return
        if group.consumer is not None:
            if group.consumer.members:  # a classic member in a consumer group (mixed_groups.py)
                self.mixed.classic_join_consumer_group(group, req, now, respond)
                return
            self.consumer.drop_consumer_part(group, now)
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
        if len(group.members) + len(group.pending_members) >= self.store.config.max_size:
            respond(JoinOutcome(ErrorCode.GROUP_MAX_SIZE_REACHED))
            return
        member_id = self.store.new_member_id(req.client_id)
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
        new_id = self.store.new_member_id(req.client_id)
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
            self.persist_group(group, now, lambda _code: None)
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
            self.prepare_rebalance(group, now)
        self._maybe_complete_join(group, now)

    # -- the join phase ----------------------------------------------------------------------------
    def prepare_rebalance(self, group: Group, now: int) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            # assignments of the generation being formed are void: members waiting in SyncGroup rejoin
            for member in group.members.values():
                _answer_sync(member, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
        rebalance_timeout = group.rebalance_timeout_ms()
        if group.is_(S.EMPTY) and self.store.config.initial_rebalance_delay_ms > 0:
            delay = self.store.config.initial_rebalance_delay_ms
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
            self.persist_group(group, now, lambda _code: None)
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
            self.timers.schedule_id(req.group_id)

    def _sync(self, req: SyncRequest, now: int, respond: Callable[[SyncOutcome], None]) -> None:
        error = self.store.availability(req.group_id)
        group = self.store.groups.get(req.group_id)
        if error is ErrorCode.NONE and group is not None and group.consumer is not None:
            respond(self.mixed.classic_sync_consumer_group(group, req, now))
            return
        if error is ErrorCode.NONE:
            error = self.member_error(group, req.member_id, req.group_instance_id, req.generation)
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
                self.prepare_rebalance(group, now)
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
                self.timers.schedule(group)

        self.persist_group(group, now, persisted_then_schedule, assignments)

    # -- Heartbeat and LeaveGroup ------------------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                  now: int) -> ErrorCode:
        error = self.store.availability(group_id)
        if error is not ErrorCode.NONE:
            return error
        group = self.store.groups.get(group_id)
        if group is not None and group.consumer is not None:
            return self.mixed.classic_heartbeat_consumer_group(group, member_id, generation, now, instance_id)
        error = self.member_error(group, member_id, instance_id, generation)
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
            self.timers.schedule_id(group_id)

    def _leave(self, group_id: str, leaving: list[tuple[str, str | None]], now: int
               ) -> tuple[ErrorCode, list[ErrorCode]]:
        error = self.store.availability(group_id)
        group = self.store.groups.get(group_id)
        if error is ErrorCode.NONE and (group is None or group.is_(S.DEAD)):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not ErrorCode.NONE:
            return error, [error] * len(leaving)
        assert group is not None
        if group.consumer is not None:
            return ErrorCode.NONE, self.mixed.classic_leave_consumer_group(group, leaving, now)
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
            self.prepare_rebalance(group, now)
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

    def member_error(self, group: Group | None, member_id: str, instance_id: str | None,
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
    def tick_group(self, group: Group, now: int) -> None:
        """Every classic deadline of the group that has passed by `now`: sessions, pending members, phases."""
        self._expire_members(group, now)
        if group.is_(S.PREPARING_REBALANCE) and now >= group.join_deadline_ms:
            self._join_deadline_reached(group, now)
        elif group.is_(S.COMPLETING_REBALANCE) and now >= group.sync_deadline_ms:
            # members that never sent SyncGroup are gone; the others must rejoin
            for member in [m for m in group.members.values() if m.sync_waiter is None]:
                self._remove_member(group, member, "did not sync before the rebalance timeout")
            self.prepare_rebalance(group, now)
            self._maybe_complete_join(group, now)

    def _join_deadline_reached(self, group: Group, now: int) -> None:
        if group.initial_delay_active and group.new_member_added and group.initial_delay_remaining_ms > 0:
            delay = min(self.store.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
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

    # -- persistence -------------------------------------------------------------------------------
    def persist_group(self, group: Group, now: int, done: Done, assignments: dict[str, bytes] | None = None
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
        self.store.append(group.group_id, [record], now, done)

    def shutdown(self) -> None:
        """Answer every waiting JoinGroup and SyncGroup: this broker stops coordinating (clients look again)."""
        for group in self.store.groups.values():
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


def deadline_of(group: Group) -> int | None:
    """The first `now` at which `tick` would act on the group as it stands: a pending member's deadline,
    a member's (`member_deadline`), or the deadline of the phase the group is in."""
    deadlines = [d for d in map(member_deadline, group.members.values()) if d is not None]
    deadlines.extend(group.pending_members.values())
    if group.is_(S.PREPARING_REBALANCE):
        deadlines.append(group.join_deadline_ms)
    elif group.is_(S.COMPLETING_REBALANCE):
        deadlines.append(group.sync_deadline_ms)
    return min(deadlines, default=None)
