"""The Streams rebalance protocol's rules (KIP-1071): StreamsGroupHeartbeat, member epochs, the topology
and its internal topics, target task assignments, reconciliation, sessions and revocation deadlines.

One part of the group coordinator (`pybroker.broker.groups.coordinator.GroupCoordinator`), which hands it
the store (groups, log, settings) and the timers; a streams group is a `Group` whose `streams` holds
`StreamsGroupData`, so its committed offsets (Kafka Streams commits through TxnOffsetCommit under
exactly-once), expiry, listing and deletion are those of any group. Event loop's thread only.

One heartbeat, in Kafka's order: validate (INVALID_REQUEST, STREAMS_INVALID_TOPOLOGY); find or create the
group (an empty classic group holding only offsets becomes a streams group) and the member
(GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED); take the topology
(a higher epoch replaces the group's; the same epoch with another topology is
STREAMS_INVALID_TOPOLOGY_EPOCH); configure it against the topic table, asking for missing internal
topics to be created (`create_topics`); bump the group epoch when members, their processes or the topics'
partition counts changed; compute a new target when the group epoch is ahead of it; move the member's
tasks towards its target: a task it must give up is revoked first (the member stays at its epoch until
its heartbeat no longer lists it), and an active task reaches it only once no other member holds it.
What changed is written to `__consumer_offsets` before the answer goes out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from pybroker.broker.groups.epoch_membership import (
    MemberRecords,
    Refused,
    answer_when_written,
    check_group,
    check_optional_ids,
    fence_expired,
    next_deadline,
    remove_member,
    take_empty_classic,
    take_static_slot,
    update_common,
)
from pybroker.broker.groups.group import Group
from pybroker.broker.groups.group_log import Records
from pybroker.broker.groups.group_store import GroupStore
from pybroker.broker.groups.group_timers import GroupTimers
from pybroker.broker.groups.state_machine import GroupState
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.streams_groups import records as rec
from pybroker.broker.streams_groups.assignor import MemberSpec, Target, Tasks, assign, task_set
from pybroker.broker.streams_groups.group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Endpoint,
    MemberState,
    StreamsGroupData,
    StreamsMember,
    tasks_size,
)
from pybroker.broker.streams_groups.group_configs import StreamsGroupConfigs
from pybroker.broker.streams_groups.outcomes import StreamsHeartbeat, StreamsHeartbeatOutcome
from pybroker.broker.streams_groups.topology import (
    InvalidTopology,
    Status,
    StatusCode,
    configure,
    topics_hash,
    validate,
)
from pybroker.protocol.errors import ErrorCode

log = get_logger("pybroker.groups")

#: caps on what one heartbeat may make the coordinator hold
MAX_ID_CHARS = 255
MAX_OWNED_TASKS = 100_000
MAX_CLIENT_TAGS = 64
MAX_TASK_OFFSETS = 100_000
#: Kafka's defaults, told to every member
TASK_OFFSET_INTERVAL_MS = 60_000

Respond = Callable[[StreamsHeartbeatOutcome], None]
#: this protocol's records, for the rules it shares with consumer groups (epoch_membership.py)
WRITERS = MemberRecords(member=rec.member_record, tombstones=rec.member_tombstones, targets=rec.target_records,
                        epoch=lambda group_id, data: [rec.epoch_record(group_id, data)])
#: internal topic name -> (partitions, configs, replication factor): create these (the service's hook)
CreateTopics = Callable[[dict[str, tuple[int, dict[str, str], int]]], None]


def _diff(a: Target, b: Target) -> Target:
    return Target(_minus(a.active, b.active), _minus(a.standby, b.standby), _minus(a.warmup, b.warmup))


def _minus(a: Tasks, b: Tasks) -> Tasks:
    out = {s: p - b.get(s, frozenset()) for s, p in a.items()}
    return {s: p for s, p in out.items() if p}


def _intersect(a: Tasks, b: Tasks) -> Tasks:
    out = {s: p & b.get(s, frozenset()) for s, p in a.items()}
    return {s: p for s, p in out.items() if p}


def _empty(t: Target) -> bool:
    return not (t.active or t.standby or t.warmup)


def _overlaps(owned: Target, pending: Target) -> bool:
    return bool(task_set(owned.active) & task_set(pending.active) or task_set(owned.standby) & task_set(pending.standby)
                or task_set(owned.warmup) & task_set(pending.warmup))


class StreamsGroups:
    """Streams-protocol membership over the store's groups."""

    def __init__(self, store: GroupStore, timers: GroupTimers) -> None:
        self.store = store
        self.timers = timers
        #: asks for internal topics to be made (set by the group service; tests may leave it doing nothing)
        self.create_topics: CreateTopics = lambda topics: None
        #: internal topics asked for and not yet seen in the topic table (not asked for twice)
        self.creating: set[str] = set()
        #: each group's own settings (IncrementalAlterConfigs on a GROUP; the broker opens its file at start)
        self.group_configs = StreamsGroupConfigs(None)

    def setting(self, group_id: str, key: str) -> int:
        """What `group_id` uses for `key` (group_configs.py): its own value, else the broker's."""
        return self.group_configs.effective(group_id, key, self.store.config)

    # -- StreamsGroupHeartbeat ---------------------------------------------------------------------------
    def heartbeat(self, req: StreamsHeartbeat, now: int, respond: Respond) -> None:
        before = self._snapshot(req.group_id)

        def refused(refusal: Refused) -> StreamsHeartbeatOutcome:
            self._restore(req.group_id, before)  # a refusal changes nothing
            return StreamsHeartbeatOutcome(refusal.error, refusal.message)

        def failed(code: ErrorCode, _outcome: StreamsHeartbeatOutcome) -> tuple[StreamsHeartbeatOutcome, bool]:
            self._restore(req.group_id, before)  # as Kafka: the group goes back to what its records say
            return StreamsHeartbeatOutcome(code, member_id=req.member_id, member_epoch=req.member_epoch), True

        answer_when_written(self.store, self.timers, req.group_id, now, lambda: self._heartbeat(req, now), respond,
                            refused=refused, failed=failed)

    def _snapshot(self, group_id: str) -> tuple[Group | None, str | None, StreamsGroupData | None]:
        """What a heartbeat may change of a group: its protocol and a copy of its streams data (members
        copied one level: their fields are replaced, never mutated in place; tasks and topologies are
        immutable)."""
        group = self.store.groups.get(group_id)
        if group is None or group.streams is None:
            return group, None if group is None else group.protocol_type, None
        data = copy.copy(group.streams)
        data.members = {m: copy.copy(member) for m, member in group.streams.members.items()}
        data.static_members = dict(data.static_members)
        data.targets = dict(data.targets)
        return group, group.protocol_type, data

    def _restore(self, group_id: str, before: tuple[Group | None, str | None, StreamsGroupData | None]) -> None:
        group, protocol_type, data = before
        current = self.store.groups.get(group_id)
        if group is None:
            if current is not None and current.streams is not None and not current.offsets:
                del self.store.groups[group_id]  # made by the undone heartbeat
            return
        if current is group:
            group.streams, group.protocol_type = data, protocol_type

    def _heartbeat(self, req: StreamsHeartbeat, now: int) -> tuple[Records, StreamsHeartbeatOutcome]:
        self._validate(req)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req, now)
        records: Records = []
        group = self._group(req, now, records)
        data = group.streams
        assert data is not None
        current = data.topology
        if req.topology is not None and current is not None and req.topology.epoch == current.epoch \
                and req.topology != current:  # refused before anything about the member changes
            raise Refused(ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH, "Topology updated but topology epoch "
                          f"not incremented (epoch {current.epoch}).")
        empty_before = not data.members
        member, is_new = self._member_for(group, data, req, now, records)
        bump = self._update_member(member, req) or is_new
        if bump:
            records.append(rec.member_record(group.group_id, member))
        member.last_heartbeat_ms = now
        if req.topology is not None:
            bump = self._take_topology(group, data, req, records) or bump
        bump = self._configure(data) or bump
        if req.shutdown_application:
            data.shutdown_requested = True
        before = member.assigned
        self.advance(group, data, member, bump, now, records, force_current=is_new, first=empty_before and bump)
        send = req.member_epoch == 0 or member.assigned != before or (
            req.owned is not None and req.owned != member.assigned)
        return records, StreamsHeartbeatOutcome(
            ErrorCode.NONE, member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.setting(group.group_id, "streams.heartbeat.interval.ms"),
            task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
            statuses=self._statuses(data, member, now) + self._missing_tags(group.group_id, member, req.version),
            assignment=member.assigned if send else None, endpoint_information_epoch=data.endpoint_epoch,
            endpoints=self._endpoints(data) if req.endpoint_information_epoch != data.endpoint_epoch else None)

    def _validate(self, req: StreamsHeartbeat) -> None:
        def refuse(message: str, error: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
            raise Refused(error, message)

        check_group(self.store, req.group_id, enabled=self.store.config.streams_protocol_enabled,
                    protocol="streams")
        if not req.member_id:
            refuse("MemberId can't be empty.")
        check_optional_ids(req)
        if len(req.member_id) > MAX_ID_CHARS or len(req.instance_id or "") > MAX_ID_CHARS \
                or len(req.process_id or "") > MAX_ID_CHARS:
            refuse(f"MemberId, InstanceId and ProcessId are at most {MAX_ID_CHARS} characters.")
        if req.owned is not None and tasks_size(req.owned.active) + tasks_size(req.owned.standby) \
                + tasks_size(req.owned.warmup) > MAX_OWNED_TASKS:
            refuse(f"At most {MAX_OWNED_TASKS} owned tasks.")
        if req.client_tags is not None and len(req.client_tags) > MAX_CLIENT_TAGS:
            refuse(f"At most {MAX_CLIENT_TAGS} client tags.")
        if len(req.task_offsets or ()) + len(req.task_end_offsets or ()) > MAX_TASK_OFFSETS:
            refuse(f"At most {MAX_TASK_OFFSETS} task offsets.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms <= 0:
                refuse("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is not None and not _empty(req.owned):
                refuse("ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining.")
            if req.topology is None:
                refuse("Topology must be non-null when (re-)joining.")
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                refuse("InstanceId can't be null.")
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            refuse(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
        if req.topology is not None:
            try:
                validate(req.topology)
            except InvalidTopology as exc:
                refuse(str(exc), ErrorCode.STREAMS_INVALID_TOPOLOGY)

    def _group(self, req: StreamsHeartbeat, now: int, records: Records) -> Group:
        group = self.store.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.")
            group = self.store.groups[req.group_id] = Group(req.group_id, state_timestamp_ms=now,
                                                            protocol_type="streams", streams=StreamsGroupData())
        if group.is_(GroupState.DEAD):
            raise Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.streams is None:
            if group.consumer is not None or group.members or group.pending_members \
                    or not group.is_(GroupState.EMPTY):
                raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a streams group.")
            if req.member_epoch != 0:
                raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.")
            group.streams = StreamsGroupData()
            take_empty_classic(group, "streams", records)
        return group

    def _member_for(self, group: Group, data: StreamsGroupData, req: StreamsHeartbeat, now: int,
                    records: Records) -> tuple[StreamsMember, bool]:
        member = data.members.get(req.member_id)
        if req.member_epoch == 0:
            if req.instance_id is not None and req.instance_id in data.static_members \
                    and data.static_members[req.instance_id] != req.member_id:
                old = data.members.get(data.static_members[req.instance_id])
                if old is not None and old.member_epoch != STATIC_LEAVE_EPOCH:
                    raise Refused(ErrorCode.UNRELEASED_INSTANCE_ID,
                                  f"Static member {req.instance_id} has not left the group.")
                if old is not None:  # its instance is back under a new id: it takes the old one's place
                    return self._replace_static(group, data, old, req, now, records), False
            if member is not None:  # it rejoins (fenced, or restarted with its id): it owns nothing now
                member.assigned = member.pending_revocation = Target()
                member.member_epoch, member.state, member.owned = 0, MemberState.STABLE, None
                return member, False
            if len(data.members) >= self.store.config.streams_max_size:
                raise Refused(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The streams group has reached its maximum "
                              f"capacity of {self.store.config.streams_max_size} members.")
            member = StreamsMember(req.member_id, instance_id=req.instance_id, client_id=req.client_id,
                                   client_host=req.client_host, last_heartbeat_ms=now)
            data.members[req.member_id] = member
            if req.instance_id is not None:
                data.static_members[req.instance_id] = req.member_id
            return member, True
        if member is None:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                          f"{req.group_id}.")
        if req.member_epoch != member.member_epoch:
            owned = req.owned if req.owned is not None else member.owned
            if not (req.member_epoch == member.previous_member_epoch and owned is not None
                    and _empty(_diff(owned, member.assigned))):
                raise Refused(ErrorCode.FENCED_MEMBER_EPOCH, f"The streams group member has a member epoch "
                              f"({req.member_epoch}) other than its current one ({member.member_epoch}).")
        return member, False

    def _replace_static(self, group: Group, data: StreamsGroupData, old: StreamsMember, req: StreamsHeartbeat,
                        now: int, records: Records) -> StreamsMember:
        """A static member that left with epoch -2 rejoins under a new member id: the old one goes, its target
        (now free) becomes the new one's, and the group does not rebalance (Kafka's static membership)."""
        member = StreamsMember(req.member_id, instance_id=req.instance_id, client_id=req.client_id,
                               client_host=req.client_host, process_id=old.process_id,
                               user_endpoint=old.user_endpoint, client_tags=dict(old.client_tags),
                               rack_id=old.rack_id, topology_epoch=old.topology_epoch, last_heartbeat_ms=now)
        taken: StreamsMember = take_static_slot(group.group_id, data, old, member, records, WRITERS)
        return taken

    @staticmethod
    def _update_member(member: StreamsMember, req: StreamsHeartbeat) -> bool:
        """Take the fields the heartbeat set; whether the assignment may change (the group epoch moves)."""
        changed = False
        update_common(member, req)
        if req.owned is not None:
            member.owned = req.owned
        if req.task_offsets is not None:
            member.task_offsets = req.task_offsets
        if req.task_end_offsets is not None:
            member.task_end_offsets = req.task_end_offsets
        for name, value in (("rack_id", req.rack_id), ("process_id", req.process_id),
                            ("user_endpoint", req.user_endpoint), ("client_tags", req.client_tags)):
            if value is not None and getattr(member, name) != value:
                setattr(member, name, value)
                changed = True
        if req.topology is not None and member.topology_epoch != req.topology.epoch:
            member.topology_epoch = req.topology.epoch
            changed = True
        return changed

    def _take_topology(self, group: Group, data: StreamsGroupData, req: StreamsHeartbeat, records: Records) -> bool:
        topology = req.topology
        assert topology is not None
        current = data.topology
        if current is not None and topology.epoch < current.epoch:
            return False  # a stale member: told STALE_TOPOLOGY, given its tasks of the group's topology
        if current is not None and topology.epoch == current.epoch:
            return False  # the same (another one was refused before the member was touched)
        data.topology = topology
        data.configured = None
        records.append(rec.topology_record(group.group_id, topology))
        log.info("streams group topology set", group=group.group_id, epoch=topology.epoch,
                 subtopologies=len(topology.subtopologies))
        return True

    def _configure(self, data: StreamsGroupData) -> bool:
        """Configure the topology against the current topic table (when either changed); ask for missing
        internal topics. Whether the topics' hash moved (the group epoch then moves)."""
        table = self.store.topic_metadata()
        if data.topology is None or (data.configured is not None and data.configured_source is table):
            return False
        topics = {name: count for name, (_tid, count) in table.items()}
        data.configured = configure(data.topology, topics)
        data.configured_source = table
        self.creating &= set(data.configured.to_create)
        wanted = {n: spec for n, spec in data.configured.to_create.items() if n not in self.creating}
        if wanted:
            self.creating.update(wanted)
            self.create_topics(wanted)
        digest = topics_hash(data.topology, topics)
        if digest != data.metadata_hash:
            data.metadata_hash = digest
            return True
        return False

    def advance(self, group: Group, data: StreamsGroupData, member: StreamsMember, bump: bool, now: int,
                records: Records, *, force_current: bool = False, first: bool = False) -> None:
        """Bump the group epoch if asked, compute a new target if the group epoch is ahead (and no initial
        rebalance delay holds it back), move the member towards its target; the records of what changed go to
        `records`.

        `first`: the member joined a group that had none, and the epoch moves. Kafka 4.4 then counts a second
        group epoch (measured against it: tests/conformance/streams_errors.py, "first-join-epochs" and
        "initial-rebalance-delay"): with the group's `streams.initial.rebalance.delay.ms` above 0, the first
        epoch's target gives nobody anything, the member is answered at it, and the target of the second waits
        for the delay (heartbeats carry ASSIGNMENT_DELAYED meanwhile; the first one past the delay computes it,
        as in Kafka, where nothing moves until a member heartbeats after its timer); with no delay, a new group
        (epoch 0) goes straight to its second epoch, and a group that had emptied counts one, as usual."""
        delay = self.setting(group.group_id, "streams.initial.rebalance.delay.ms") if first else 0
        if bump:
            new_group = first and delay <= 0 and data.group_epoch == 0
            data.group_epoch += 2 if new_group else 1
            records.append(rec.epoch_record(group.group_id, data))
        if data.group_epoch > data.assignment_epoch and now >= data.assign_after_ms:
            records += self._compute_target(group, data, hold=first and delay > 0)
        before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
        self._reconcile(data, member, now)
        if force_current or (member.member_epoch, member.state, member.assigned, member.pending_revocation) != before:
            records.append(rec.current_record(group.group_id, member))
        if first and delay > 0:
            data.group_epoch += 1
            data.assign_after_ms = now + delay
            records.append(rec.epoch_record(group.group_id, data))
            log.info("streams group assignment delayed", group=group.group_id, delay_ms=delay,
                     epoch=data.group_epoch)
        data.refresh_state()

    def _compute_target(self, group: Group, data: StreamsGroupData, *, hold: bool = False) -> Records:
        """A new target at the group epoch (`hold`: one that gives nobody a task, before an initial delay)."""
        configured = data.configured
        tasks = configured.tasks if configured is not None and configured.ready and not hold else {}
        specs = {m.member_id: MemberSpec(m.process_id or m.member_id, m.assigned.active, m.assigned.standby)
                 for m in data.members.values()}
        stateful = frozenset(s.subtopology_id for s in data.topology.subtopologies if s.state_changelog_topics) \
            if data.topology is not None else frozenset()
        targets = assign(tasks, specs, self.setting(group.group_id, "streams.num.standby.replicas"), stateful)
        changed = [m for m in data.members if targets.get(m, Target()) != data.targets.get(m)]
        data.targets = {m: targets.get(m, Target()) for m in data.members}
        data.assignment_epoch = data.group_epoch
        if any(m.user_endpoint is not None for m in data.members.values()):
            data.endpoint_epoch += 1  # members with an endpoint learn where the tasks went
        log.debug("streams target assignment computed", group=group.group_id, epoch=data.assignment_epoch,
                  members=len(data.members), tasks=sum(tasks.values()))
        return rec.target_records(group.group_id, data, changed)

    def _reconcile(self, data: StreamsGroupData, member: StreamsMember, now: int) -> None:
        target = data.targets.get(member.member_id, Target())
        if member.state is MemberState.UNREVOKED_TASKS:
            if member.owned is None or _overlaps(member.owned, member.pending_revocation):
                return  # it has not given them up yet
            member.pending_revocation = Target()
        revoke = _diff(member.assigned, target)
        if not _empty(revoke):
            member.pending_revocation = revoke
            member.assigned = Target(_intersect(member.assigned.active, target.active),
                                     _intersect(member.assigned.standby, target.standby),
                                     _intersect(member.assigned.warmup, target.warmup))
            member.state = MemberState.UNREVOKED_TASKS
            member.revocation_deadline_ms = now + max(member.rebalance_timeout_ms, 0)
            return
        held = data.active_owners(member.member_id)
        blocked = {(s, p) for s, parts in target.active.items() for p in parts if (s, p) in held}
        active = {s: frozenset(p for p in parts if (s, p) not in blocked) for s, parts in target.active.items()}
        member.assigned = Target({s: p for s, p in active.items() if p}, target.standby, target.warmup)
        if member.member_epoch != data.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = data.assignment_epoch
        member.state = MemberState.UNRELEASED_TASKS if blocked else MemberState.STABLE
        member.revocation_deadline_ms = -1

    def _statuses(self, data: StreamsGroupData, member: StreamsMember, now: int) -> tuple[Status, ...]:
        statuses = list(data.configured.statuses) if data.configured is not None else []
        if now < data.assign_after_ms:
            statuses.insert(0, Status(StatusCode.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured "
                                      "initial rebalance delay."))
        if data.topology is not None and member.topology_epoch < data.topology.epoch:
            statuses.insert(0, Status(StatusCode.STALE_TOPOLOGY, f"The member's topology epoch "
                                      f"{member.topology_epoch} is behind the group's {data.topology.epoch}."))
        if data.shutdown_requested:
            statuses.append(Status(StatusCode.SHUTDOWN_APPLICATION,
                                   "A KafkaStreams instance encountered a fatal error and requested a shutdown "
                                   "for the entire application."))
        return tuple(statuses)

    def _missing_tags(self, group_id: str, member: StreamsMember, version: int) -> tuple[Status, ...]:
        """MISSING_CLIENT_TAGS (v1) for a member without every tag key of the group's
        `streams.rack.aware.assignment.tags`, as Kafka 4.4 tells it; it changes nothing else (Kafka's sticky
        assignor places standbys without the tags)."""
        if version < 1:
            return ()
        missing = [t for t in self.group_configs.tags(group_id, self.store.config) if t not in member.client_tags]
        if not missing:
            return ()
        return (Status(StatusCode.MISSING_CLIENT_TAGS, f"Missing required client tags for rack-aware standby "
                       f"assignment: [{', '.join(missing)}]. Configure them via 'client.tag.<tagKey>' in your "
                       "Streams config."),)

    def _endpoints(self, data: StreamsGroupData
                   ) -> list[tuple[Endpoint, dict[str, list[int]], dict[str, list[int]]]] | None:
        """Where each task's partitions run, for members with a user endpoint (interactive queries)."""
        members = [(m, m.user_endpoint) for m in data.members.values() if m.user_endpoint is not None]
        if not members or data.topology is None:
            return None
        inputs = {s.subtopology_id: (*s.source_topics, *(t.name for t in s.repartition_source_topics))
                  for s in data.topology.subtopologies}

        def partitions(tasks: Tasks) -> dict[str, list[int]]:
            out: dict[str, set[int]] = {}
            for sub, parts in tasks.items():
                for topic in inputs.get(sub, ()):
                    out.setdefault(topic, set()).update(parts)
            return {t: sorted(p) for t, p in sorted(out.items())}

        return [(endpoint, partitions(m.assigned.active), partitions({**m.assigned.standby, **m.assigned.warmup}))
                for m, endpoint in members]

    # -- leaving and fencing -----------------------------------------------------------------------------
    def _leave(self, req: StreamsHeartbeat, now: int) -> tuple[Records, StreamsHeartbeatOutcome]:
        group = self.store.groups.get(req.group_id)
        data = group.streams if group is not None else None
        if group is None or data is None:
            raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.")
        member = data.members.get(req.member_id)
        if member is None:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                          f"Member {req.member_id} is not a member of group {req.group_id}.")
        outcome = StreamsHeartbeatOutcome(ErrorCode.NONE, member_id=member.member_id, member_epoch=req.member_epoch)
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            member.member_epoch, member.previous_member_epoch = STATIC_LEAVE_EPOCH, member.member_epoch
            member.last_heartbeat_ms = now
            return [rec.current_record(group.group_id, member)], outcome
        return self.remove_member(group, data, member, "left the group", now), outcome

    def remove_member(self, group: Group, data: StreamsGroupData, member: StreamsMember, reason: str,
                      now: int) -> Records:
        def when_empty() -> None:
            data.shutdown_requested = False

        return remove_member(group, data, member, reason, WRITERS, when_empty=when_empty,
                             compute_target=lambda: self._compute_target(group, data))

    def _session(self, group: Group) -> Callable[[StreamsMember], int]:
        session_ms = self.setting(group.group_id, "streams.session.timeout.ms")
        return lambda _member: session_ms

    def tick(self, group: Group, now: int) -> None:
        """Fence members past their session, or past their revocation deadline."""
        data = group.streams
        if data is None:
            return
        records = fence_expired(data, now, self._session(group),
                                lambda member, reason: self.remove_member(group, data, member, reason, now),
                                owns="tasks")
        if records:
            self.store.append(group.group_id, records, now, lambda _code: None)

    def deadline(self, group: Group) -> int | None:
        data = group.streams
        return None if data is None else next_deadline(data, self._session(group))

def streams_commit_error(data: StreamsGroupData, member_id: str, member_epoch: int,
                         api_version: int | None = None) -> ErrorCode:
    """Kafka's check of a commit to a streams group: from outside the group (a negative epoch: a tool) only
    while it has no member; from a member only at its current epoch (STALE_MEMBER_EPOCH). An OffsetCommit
    (`api_version`; None for TxnOffsetCommit) must be v9+, the first to carry the member epoch."""
    if member_epoch < 0 and not data.members:
        return ErrorCode.NONE
    member = data.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if api_version is not None and api_version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    if member_epoch != member.member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE
