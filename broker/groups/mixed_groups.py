"""Classic members in a consumer group, and the conversions between the two protocols (Kafka 4's mixed groups).

A mixin of `GroupCoordinator`. A consumer that speaks only the classic protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, with protocol type "consumer") may join a group run by the consumer protocol: it
becomes a member like the others, whose subscription is read from its JoinGroup metadata
(ConsumerProtocolSubscription) and whose owned partitions are those the subscription lists (none for an
eager client, which revoked everything before rejoining). Its JoinGroup moves it towards its target at once
(its generation is its member epoch); its SyncGroup answers its current assignment as a
ConsumerProtocolAssignment; its Heartbeat answers REBALANCE_IN_PROGRESS while it is not at the target, so
it rejoins and moves on, the partitions it gives up reaching others only once its rejoin no longer lists
them. Nobody is the classic leader: no client computes an assignment.

Conversions: a classic group whose members all use protocol type "consumer" and have an assignment to keep
becomes a consumer group when a consumer-protocol member joins, whatever its state (each member keeps its
assignment as its current one, at the group's generation; a rebalance in progress is abandoned, its
waiting members told to rejoin); a consumer group whose last consumer-protocol
member leaves while classic members remain becomes a classic group, the classic members asked to rejoin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pybroker.broker.groups import consumer_records as rec
from pybroker.broker.groups.consumer_group import (
    Assignment,
    ClassicMemberInfo,
    ConsumerGroupData,
    ConsumerMember,
)
from pybroker.broker.groups.consumer_snapshot import ConsumerUndo
from pybroker.broker.groups.consumer_state_machine import MemberState
from pybroker.broker.groups.group import Group, Member
from pybroker.broker.groups.group_log import GroupLog, Records, client_error
from pybroker.broker.groups.outcomes import (
    UNKNOWN_MEMBER_ID,
    JoinOutcome,
    JoinRequest,
    SyncOutcome,
    SyncRequest,
    leaving_member_id,
)
from pybroker.broker.groups.state_machine import GroupState
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.consumer_protocol import (
    AssignedTopicPartition,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from pybroker.protocol.offsets_topic_records import group_metadata_key
from pybroker.protocol.primitives import DecodeError

if TYPE_CHECKING:
    import uuid

    from pybroker.broker.groups.consumer_coordinator import TopicMetadata
    from pybroker.broker.groups.coordinator import GroupConfig

log = get_logger("pybroker.groups")

PROTOCOL_TYPE = "consumer"
_VERSION_BYTES = 2


def parse_subscription(metadata: bytes) -> tuple[int, ConsumerProtocolSubscription] | None:
    if len(metadata) < _VERSION_BYTES:
        return None
    version = min(int.from_bytes(metadata[:_VERSION_BYTES], "big", signed=True), ConsumerProtocolSubscription.MAX_VERSION)
    if version < 0:
        return None
    try:
        return version, ConsumerProtocolSubscription.decode(metadata, version, _VERSION_BYTES, strict=False)
    except DecodeError:
        return None


def parse_assignment(data: bytes) -> ConsumerProtocolAssignment | None:
    if len(data) < _VERSION_BYTES:
        return None
    version = min(int.from_bytes(data[:_VERSION_BYTES], "big", signed=True), ConsumerProtocolAssignment.MAX_VERSION)
    if version < 0:
        return None
    try:
        return ConsumerProtocolAssignment.decode(data, version, _VERSION_BYTES, strict=False)
    except DecodeError:
        return None


class MixedGroups:
    config: GroupConfig
    log: GroupLog
    groups: dict[str, Group]
    topic_metadata: Callable[[], TopicMetadata]
    new_member_id: Callable[[str], str]
    consumer_undo: ConsumerUndo

    def partition_for(self, group_id: str) -> int:
        raise NotImplementedError

    def _schedule_id(self, group_id: str) -> None:
        raise NotImplementedError

    def _advance(self, group: Group, data: ConsumerGroupData, member: ConsumerMember, changed: bool,
                 is_new: bool, owned: Assignment | None, now: int, records: Records) -> Assignment:
        raise NotImplementedError

    def _remove_consumer_member(self, group: Group, data: ConsumerGroupData, member: ConsumerMember,
                                reason: str, now: int) -> Records:
        raise NotImplementedError

    @staticmethod
    def _take_static_slot(group: Group, data: ConsumerGroupData, old: ConsumerMember, member: ConsumerMember,
                          records: Records) -> ConsumerMember:
        raise NotImplementedError

    def _prepare_rebalance(self, group: Group, now: int) -> None:
        raise NotImplementedError
    def _persist_group(self, group: Group, now: int, done: Callable[[ErrorCode], None],
                       assignments: dict[str, bytes] | None = None) -> None:
        raise NotImplementedError

    # -- names and ids -----------------------------------------------------------------------------
    def _by_name(self, named: list[tuple[str, list[int]]]) -> Assignment:
        topics = self.topic_metadata()
        owned: dict[uuid.UUID, frozenset[int]] = {}
        for name, partitions in named:
            if name in topics:
                topic_id, count = topics[name]
                owned[topic_id] = owned.get(topic_id, frozenset()) | frozenset(p for p in partitions if 0 <= p < count)
        return {t: p for t, p in owned.items() if p}

    def _names_of(self, assignment: Assignment) -> list[AssignedTopicPartition]:
        names = {topic_id: name for name, (topic_id, _) in self.topic_metadata().items()}
        return [AssignedTopicPartition(topic=names[t], partitions=sorted(p))
                for t, p in sorted(assignment.items(), key=lambda item: names.get(item[0], "")) if t in names]

    # -- JoinGroup -------------------------------------------------------------------------------------
    def classic_join_consumer_group(self, group: Group, req: JoinRequest, now: int,
                                    respond: Callable[[JoinOutcome], None]) -> None:
        data = group.consumer
        assert data is not None
        parsed = parse_subscription(req.protocols[0][1]) if req.protocols else None
        if req.protocol_type != PROTOCOL_TYPE or parsed is None:
            respond(JoinOutcome(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
            return
        _, subscription = parsed
        before = self.consumer_undo.take(self.groups, group.group_id, req.member_id)
        records: Records = []
        replaced = data.members.get(data.static_members.get(req.group_instance_id or "", "")) \
            if req.member_id == UNKNOWN_MEMBER_ID else None
        found = self._joining_member(group, data, req, now, records)
        if isinstance(found, JoinOutcome):
            respond(found)
            return
        member, is_new = found
        member_id = member.member_id
        info = ClassicMemberInfo(req.session_timeout_ms, list(req.protocols))
        topics = sorted(set(subscription.topics))
        changed = is_new or topics != member.subscribed_topic_names or (
            member.classic is not None and member.classic.protocols != info.protocols)
        member.classic = info
        member.client_id, member.client_host = req.client_id, req.client_host
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.subscribed_topic_names = topics
        owned = self._by_name([(o.topic, list(o.partitions)) for o in subscription.owned_partitions])
        self._advance(group, data, member, changed, is_new, owned, now, records)
        if replaced is not None and replaced.classic is None:
            # it took the slot of the last consumer-protocol member: the group turns classic (Kafka's downgrade)
            records += self.maybe_downgrade(group, now)
        outcome = JoinOutcome(ErrorCode.NONE, member_id, member.member_epoch, PROTOCOL_TYPE, req.protocols[0][0], "")

        if not records:  # a rejoin that changed nothing: nothing to write
            respond(outcome)
            return

        def written(code: ErrorCode) -> None:
            if code is not ErrorCode.NONE and self.consumer_undo.restore(self.groups, before):
                log.warning("group change undone: its records were not written", group=group.group_id,
                            error=code.name)
                self._schedule_id(group.group_id)
            respond(outcome if code is ErrorCode.NONE else JoinOutcome(client_error(code), member_id=member_id))

        self.log.append(self.partition_for(group.group_id), records, now, written)

    def _joining_member(self, group: Group, data: ConsumerGroupData, req: JoinRequest, now: int,
                        records: Records) -> tuple[ConsumerMember, bool] | JoinOutcome:
        """The member a classic JoinGroup is (and whether it is new), or the answer refusing it. As Kafka 4: an
        unknown dynamic member is handed an id (MEMBER_ID_REQUIRED) it is not held to; a static member
        (group.instance.id) joining without an id takes its instance's slot from whoever holds it, and rejoins
        under that id only (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)."""
        instance = req.group_instance_id
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        member_id = self.new_member_id(req.client_id) if unknown else req.member_id
        if member_id not in data.members and len(data.members) >= self.config.consumer_max_size:
            return JoinOutcome(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=req.member_id)
        if unknown and req.require_known_member_id and instance is None:
            return JoinOutcome(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        static_id = data.static_members.get(instance) if instance is not None else None
        if instance is not None and not unknown:
            if static_id is None:
                return JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            if static_id != member_id:
                return JoinOutcome(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
        member = data.members.get(member_id)
        if member is not None:
            if member.classic is None:  # the id of a consumer-protocol member
                return JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            return member, False
        member = ConsumerMember(member_id, instance_id=instance, last_heartbeat_ms=now)
        if static_id is not None:
            old = data.members[static_id]
            member.rack_id = old.rack_id
            self._take_static_slot(group, data, old, member, records)
            return member, False  # its member record is written; its own changes follow
        data.members[member_id] = member
        if instance is not None:
            data.static_members[instance] = member_id
        return member, True

    # -- SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------------------------
    def _classic_member(self, group: Group, member_id: str, generation: int, instance_id: str | None = None
                        ) -> tuple[ErrorCode, ConsumerMember | None]:
        data = group.consumer
        if data is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if instance_id is not None:  # Kafka finds a static member by its instance id, then checks the member id
            static_id = data.static_members.get(instance_id)
            if static_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, None
            if static_id != member_id:
                return ErrorCode.FENCED_INSTANCE_ID, None
        member = data.members.get(member_id)
        if member is None or member.classic is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION, None
        return ErrorCode.NONE, member

    def classic_sync_consumer_group(self, group: Group, req: SyncRequest, now: int) -> SyncOutcome:
        error, member = self._classic_member(group, req.member_id, req.generation, req.group_instance_id)
        if member is None or member.classic is None:
            return SyncOutcome(error)
        name = member.classic.protocols[0][0]
        if (req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE) or (
                req.protocol_name is not None and req.protocol_name != name):
            return SyncOutcome(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member.last_heartbeat_ms = now
        parsed = parse_subscription(member.classic.protocols[0][1])
        version = min(parsed[0] if parsed else 0, ConsumerProtocolAssignment.MAX_VERSION)
        assignment = ConsumerProtocolAssignment(assigned_partitions=self._names_of(member.assigned))
        return SyncOutcome(ErrorCode.NONE, PROTOCOL_TYPE, name,
                           version.to_bytes(_VERSION_BYTES, "big", signed=True) + assignment.encode(version))

    def classic_heartbeat_consumer_group(self, group: Group, member_id: str, generation: int, now: int,
                                         instance_id: str | None = None) -> ErrorCode:
        error, member = self._classic_member(group, member_id, generation, instance_id)
        if member is None:
            return error
        member.last_heartbeat_ms = now
        data = group.consumer
        assert data is not None
        if member.state is not MemberState.STABLE or member.member_epoch != data.assignment_epoch:
            return ErrorCode.REBALANCE_IN_PROGRESS  # it rejoins, and its JoinGroup moves it on
        return ErrorCode.NONE

    def classic_leave_consumer_group(self, group: Group, leaving: list[tuple[str, str | None]], now: int
                                     ) -> list[ErrorCode]:
        data = group.consumer
        assert data is not None
        codes: list[ErrorCode] = []
        records: Records = []
        for entry_id, instance in leaving:
            member_id = leaving_member_id(entry_id, instance, data.static_members)
            if isinstance(member_id, ErrorCode):
                codes.append(member_id)
                continue
            member = data.members.get(member_id)
            if member is None or member.classic is None:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            if group.consumer is not data:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)  # the group became classic meanwhile
                continue
            records += self._remove_consumer_member(group, data, member, "left the group", now)
            codes.append(ErrorCode.NONE)
        if records:
            self.log.append(self.partition_for(group.group_id), records, now, lambda _code: None)
        return codes

    # -- conversions -----------------------------------------------------------------------------------
    def can_upgrade(self, group: Group) -> bool:
        """Kafka's rule: the migration policy allows it, the group's members are consumers (protocol type
        "consumer") and not more than a consumer group may hold, and every member's subscription and last
        assignment can be read (a member that joined during a rebalance has none yet: not until it synced).
        The classic group's state does not matter: a rebalance in progress is abandoned, its waiting members
        told REBALANCE_IN_PROGRESS so they rejoin the consumer group."""
        if self.config.consumer_migration_policy not in ("upgrade", "bidirectional"):
            return False
        if group.consumer is not None or group.protocol_type != PROTOCOL_TYPE or not group.members \
                or group.is_(GroupState.DEAD) or len(group.members) > self.config.consumer_max_size:
            return False
        return all(parse_subscription(m.metadata_for(group.protocol_name)) is not None
                   and parse_assignment(m.assignment) is not None for m in group.members.values())

    def upgrade(self, group: Group, now: int, records: Records) -> Group:
        """The classic members become members of a consumer group, each keeping its assignment; the new group."""
        data = ConsumerGroupData(group_epoch=group.generation, assignment_epoch=group.generation)
        for m in group.members.values():
            parsed = parse_subscription(m.metadata_for(group.protocol_name))
            assignment = parse_assignment(m.assignment)
            assert parsed is not None and assignment is not None
            protocols = [(name, meta) for name, meta in m.protocols]
            member = ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=sorted(set(parsed[1].topics)), rebalance_timeout_ms=m.rebalance_timeout_ms,
                member_epoch=group.generation, last_heartbeat_ms=now,
                classic=ClassicMemberInfo(m.session_timeout_ms, protocols))
            member.assigned = self._by_name([(a.topic, list(a.partitions)) for a in assignment.assigned_partitions])
            # two members claiming a partition (a broken leader): the first keeps it
            member.assigned = {t: frozenset(p for p in parts if data.owner_epoch(t, p) == -1)
                               for t, parts in member.assigned.items()}
            data.members[m.member_id] = member
            if m.group_instance_id is not None:
                data.static_members[m.group_instance_id] = m.member_id
            data.targets[m.member_id] = dict(member.assigned)
            data.claim(member)
            records.append(rec.member_record(group.group_id, member))
            records += rec.target_records(group.group_id, data, [m.member_id])[:-1]
            records.append(rec.current_record(group.group_id, member))
        data.subscription_metadata = {name: meta for name, meta in self.topic_metadata().items()
                                      if any(name in m.subscribed_topic_names for m in data.members.values())}
        records += rec.epoch_records(group.group_id, data)
        records += rec.target_records(group.group_id, data, [])
        records.append((group_metadata_key(group.group_id), None))
        # Kafka replaces the classic group by a consumer group; the committed offsets go along
        converted = Group(group.group_id, state_timestamp_ms=now, protocol_type=PROTOCOL_TYPE, consumer=data,
                          offsets=group.offsets, pending_txn=group.pending_txn)
        self.groups[group.group_id] = converted
        data.refresh_state()
        log.info("group converted to the consumer protocol", group=group.group_id, members=len(data.members))
        for m in group.members.values():  # an abandoned rebalance: they rejoin, as members of the consumer group
            join, sync = m.join_waiter, m.sync_waiter
            m.join_waiter = m.sync_waiter = None
            if join is not None:
                join(JoinOutcome(ErrorCode.REBALANCE_IN_PROGRESS, member_id=m.member_id))
            if sync is not None:
                sync(SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
        return converted

    def maybe_downgrade(self, group: Group, now: int) -> Records:
        """Classic members alone in a consumer group: it becomes a classic group and they rejoin."""
        data = group.consumer
        if data is None or not data.members or any(m.classic is None for m in data.members.values()) \
                or self.config.consumer_migration_policy not in ("downgrade", "bidirectional"):
            return []
        records = rec.group_tombstones(group.group_id, data)
        group.consumer = None
        group.protocol_type = PROTOCOL_TYPE
        group.generation = data.group_epoch
        for m in data.members.values():
            assert m.classic is not None
            group.members[m.member_id] = Member(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
                max(m.rebalance_timeout_ms, 0), PROTOCOL_TYPE, list(m.classic.protocols), last_heartbeat_ms=now)
            if m.instance_id is not None:
                group.static_members[m.instance_id] = m.member_id
        group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol() if group.candidate_protocols() else None
        self._prepare_rebalance(group, now)
        self._persist_group(group, now, lambda _code: None)
        log.info("group converted to the classic protocol", group=group.group_id, members=len(group.members))
        return records
