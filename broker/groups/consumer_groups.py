"""The consumer protocol's rules (KIP-848): ConsumerGroupHeartbeat, member epochs, target assignments
computed by a server-side assignor, reconciliation, sessions and revocation deadlines.

One part of the group coordinator (`coordinator.GroupCoordinator`), which hands it the store (the groups,
the log, the settings), the timers and the mixed-groups part (the conversions between protocols); a group
of this protocol is a `Group` whose `consumer` holds `ConsumerGroupData`, so its committed offsets,
expiry, listing and deletion are those of any group. Event loop's thread only.

One heartbeat, in Kafka's order: validate (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION); find or create the group (an empty classic group is converted) and the
member (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED); take
what changed in its subscription; bump the group epoch when the subscription or the subscribed topics
changed; compute a new target assignment when the group epoch is ahead of it; move the member's current
assignment towards its target (`reconciliation.reconcile`); write what changed and answer once it is
durable. Sessions (`group.consumer.session.timeout.ms`) and revocation deadlines (the member's rebalance
timeout) are deadlines on the group timers (`group_timers.py`): a member past either is fenced, its partitions freed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pybroker.broker.groups import consumer_records as rec
from pybroker.broker.groups.assignors import ASSIGNORS
from pybroker.broker.groups.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroupData,
    ConsumerMember,
    assignment_size,
)
from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat, ConsumerHeartbeatOutcome
from pybroker.broker.groups.consumer_snapshot import ConsumerUndo
from pybroker.broker.groups.consumer_state_machine import MemberState
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
from pybroker.broker.groups.group_store import GroupStore, TopicMetadata
from pybroker.broker.groups.group_timers import GroupTimers
from pybroker.broker.groups.reconciliation import assignment_epochs, reconcile
from pybroker.broker.groups.state_machine import GroupState
from pybroker.broker.groups.topic_regex import RegexError, compile_topic_regex, matching
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker.groups.mixed_groups import MixedGroups

log = get_logger("pybroker.groups")

#: caps on what one heartbeat may make the coordinator hold or compute
MAX_SUBSCRIBED_TOPICS = 10_000
MAX_OWNED_PARTITIONS = 100_000
MAX_ID_CHARS = 255

Respond = Callable[[ConsumerHeartbeatOutcome], None]
#: this protocol's records, for the rules it shares with streams groups (epoch_membership.py)
WRITERS = MemberRecords(member=rec.member_record, tombstones=rec.member_tombstones, targets=rec.target_records,
                        epoch=rec.epoch_records)


class ConsumerGroups:
    """Consumer-protocol membership over the store's groups."""

    def __init__(self, store: GroupStore, timers: GroupTimers) -> None:
        self.store = store
        self.timers = timers
        #: undoes a consumer-group change whose records could not be written (consumer_snapshot.py)
        self.consumer_undo = ConsumerUndo()
        #: regex -> (the topic table it was resolved against, the names it matched)
        self._regex_cache: dict[str, tuple[object, set[str]]] = {}
        #: the conversions between protocols (set by the coordinator once the part exists)
        self.mixed: MixedGroups

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------------
    def consumer_heartbeat(self, req: ConsumerHeartbeat, now: int, respond: Respond) -> None:
        before = self.consumer_undo.take(self.store.groups, req.group_id, req.member_id)

        def refused(refusal: Refused) -> ConsumerHeartbeatOutcome:
            if self.consumer_undo.converted(self.store.groups, before):  # refused after converting the group: undone
                self.consumer_undo.restore(self.store.groups, before, written=False)
            # a refusal names no member and no epoch (null, 0), as Kafka 4.4's error answers
            return ConsumerHeartbeatOutcome(refusal.error, refusal.message, member_id=None, member_epoch=0)

        def failed(code: ErrorCode, outcome: ConsumerHeartbeatOutcome) -> tuple[ConsumerHeartbeatOutcome, bool]:
            undone = self.consumer_undo.restore(self.store.groups, before)  # Kafka reverts to what was written
            return ConsumerHeartbeatOutcome(code, member_id=outcome.member_id, member_epoch=req.member_epoch), undone

        answer_when_written(self.store, self.timers, req.group_id, now, lambda: self._consumer_heartbeat(req, now),
                            respond, refused=refused, failed=failed)

    def _consumer_heartbeat(self, req: ConsumerHeartbeat, now: int) -> tuple[Records, ConsumerHeartbeatOutcome]:
        self._validate_heartbeat(req)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._consumer_leave(req, now)
        records: Records = []
        group = self._consumer_group(req, now, records)
        data = group.consumer
        assert data is not None
        member, is_new = self._member_for(group, data, req, now, records)
        changed = self._update_member(member, req) or is_new
        before = self.advance(group, data, member, changed, is_new, req.owned, now, records)
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and req.owned is not None and (
            req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        # also when what it says it owns is not what it has (an answer of ours was lost on the way)
        send_assignment = full or member.assigned != before or (req.owned is not None and member.assigned != req.owned)
        return records, ConsumerHeartbeatOutcome(
            ErrorCode.NONE, member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.store.config.consumer_heartbeat_interval_ms,
            assignment=dict(member.assigned) if send_assignment else None)

    def advance(self, group: Group, data: ConsumerGroupData, member: ConsumerMember, changed: bool,
                 is_new: bool, owned: Assignment | None, now: int, records: Records) -> Assignment:
        """After a member's heartbeat (or a classic member's join): bump the group epoch if its subscription or
        the subscribed topics changed, compute a new target if the group epoch is ahead, move the member
        towards its target; the records of what changed go to `records`. Returns what it had assigned before."""
        member.last_heartbeat_ms = now
        if changed:
            records.append(rec.member_record(group.group_id, member))
        topics = self.store.topic_metadata()
        # the subscribed topics change only with a subscription or with the topic table (a new object then)
        metadata = self._subscription_metadata(data) if changed or data.metadata_source is not topics \
            else data.subscription_metadata
        data.metadata_source = topics
        if changed or metadata != data.subscription_metadata:
            data.group_epoch += 1
            data.subscription_metadata = metadata
            records += rec.epoch_records(group.group_id, data)
        if data.group_epoch > data.assignment_epoch:
            records += self._compute_target(group, data, member.server_assignor)
        before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
        self._reconcile(data, member, owned, now)
        if (member.member_epoch, member.state, member.assigned, member.pending_revocation) != before or is_new:
            records.append(rec.current_record(group.group_id, member))
        data.refresh_state()
        return before[2]

    def _validate_heartbeat(self, req: ConsumerHeartbeat) -> None:
        def refuse(message: str, error: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
            raise Refused(error, message)

        check_group(self.store, req.group_id, enabled=self.store.config.consumer_protocol_enabled,
                    protocol="consumer")
        check_optional_ids(req)
        if len(req.member_id) > MAX_ID_CHARS or len(req.instance_id or "") > MAX_ID_CHARS:
            refuse(f"MemberId and InstanceId are at most {MAX_ID_CHARS} characters.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms <= 0:
                refuse("RebalanceTimeoutMs must be provided in first request.")
            if req.owned:
                refuse("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                refuse("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                refuse("InstanceId can't be null.")
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            refuse(f"MemberEpoch {req.member_epoch} is invalid.")
        if req.member_epoch != 0 and not req.member_id:
            refuse("MemberId can't be empty.")
        if req.subscribed_topic_names is not None and len(req.subscribed_topic_names) > MAX_SUBSCRIBED_TOPICS:
            refuse(f"At most {MAX_SUBSCRIBED_TOPICS} subscribed topic names.")
        if req.owned is not None and assignment_size(req.owned) > MAX_OWNED_PARTITIONS:
            refuse(f"At most {MAX_OWNED_PARTITIONS} owned partitions.")
        if req.server_assignor is not None and req.server_assignor not in self.store.config.consumer_assignors:
            refuse(f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                   f"{', '.join(self.store.config.consumer_assignors)}.", ErrorCode.UNSUPPORTED_ASSIGNOR)
        if req.subscribed_topic_regex:
            try:
                compile_topic_regex(req.subscribed_topic_regex)
            except RegexError as exc:
                refuse(f"SubscribedTopicRegex {req.subscribed_topic_regex[:64]!r} is invalid: {exc}",
                       ErrorCode.INVALID_REGULAR_EXPRESSION)

    def _consumer_group(self, req: ConsumerHeartbeat, now: int, records: Records) -> Group:
        group = self.store.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:  # as Kafka: only a join (epoch 0) makes a group
                raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
            group = self.store.groups[req.group_id] = Group(req.group_id, state_timestamp_ms=now, protocol_type="consumer",
                                                      consumer=ConsumerGroupData())
        if group.is_(GroupState.DEAD):
            raise Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.consumer is None and self.mixed.can_upgrade(group):
            if req.member_epoch != 0:
                raise Refused(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.mixed.upgrade(group, now, records)  # Kafka's online upgrade: its members stay, as classic members
        if group.consumer is None:
            if group.members or group.pending_members or not group.is_(GroupState.EMPTY):
                raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer "
                                       "group: it has members of the classic protocol that cannot move yet.")
            group.consumer = ConsumerGroupData()  # Kafka's upgrade of an empty classic group
            take_empty_classic(group, "consumer", records)
        return group

    def _member_for(self, group: Group, data: ConsumerGroupData, req: ConsumerHeartbeat, now: int,
                    records: Records) -> tuple[ConsumerMember, bool]:
        if req.member_epoch == 0:
            if req.instance_id is not None and req.instance_id in data.static_members:
                return self._replace_static(group, data, req, now, records), False
            existing = data.members.get(req.member_id) if req.member_id else None
            if existing is not None:
                # the member rejoins (it was fenced, or restarted with its id): it owns nothing now
                if existing.instance_id != req.instance_id:
                    raise Refused(ErrorCode.FENCED_INSTANCE_ID)
                data.release(existing)
                existing.assigned, existing.pending_revocation = {}, {}
                existing.member_epoch, existing.state = 0, MemberState.STABLE
                return existing, False
            if len(data.members) >= self.store.config.consumer_max_size:
                raise Refused(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                       f"The consumer group has reached its maximum capacity of "
                                       f"{self.store.config.consumer_max_size} members.")
            member_id = req.member_id or str(uuid.uuid4())
            joined = ConsumerMember(member_id, instance_id=req.instance_id, client_id=req.client_id,
                                    client_host=req.client_host, last_heartbeat_ms=now)
            data.members[member_id] = joined
            if req.instance_id is not None:
                data.static_members[req.instance_id] = member_id
            return joined, True
        member = data.members.get(req.member_id)
        if member is None:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {req.member_id} is not a member of group {req.group_id}.")
        if req.instance_id is not None and member.instance_id != req.instance_id:
            raise Refused(ErrorCode.FENCED_INSTANCE_ID)
        if req.member_epoch > member.member_epoch or (req.member_epoch < member.member_epoch and (
                req.member_epoch != member.previous_member_epoch or not _subset(req.owned, member.assigned))):
            raise Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                                   f"The member epoch {req.member_epoch} is not the coordinator's "
                                   f"({member.member_epoch}): abandon every partition and rejoin.")
        return member, False

    def _replace_static(self, group: Group, data: ConsumerGroupData, req: ConsumerHeartbeat, now: int,
                        records: Records) -> ConsumerMember:
        """A static member back after a restart takes over its old slot (epoch, assignment) under its new id."""
        assert req.instance_id is not None
        old = data.members[data.static_members[req.instance_id]]
        # a classic static member is replaced at once (Kafka checks the release only between two of this protocol)
        if old.classic is None and old.member_epoch != STATIC_LEAVE_EPOCH and old.member_id != req.member_id:
            raise Refused(ErrorCode.UNRELEASED_INSTANCE_ID,
                                   f"Static member {old.member_id} with instance id {req.instance_id} is "
                                   "present in the consumer group.")
        member = ConsumerMember(
            req.member_id or str(uuid.uuid4()), instance_id=req.instance_id, rack_id=old.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=list(old.subscribed_topic_names), subscribed_topic_regex=old.subscribed_topic_regex,
            rebalance_timeout_ms=old.rebalance_timeout_ms, server_assignor=old.server_assignor, last_heartbeat_ms=now)
        return self.take_static_slot(group, data, old, member, records)

    @staticmethod
    def take_static_slot(group: Group, data: ConsumerGroupData, old: ConsumerMember, member: ConsumerMember,
                         records: Records) -> ConsumerMember:
        """`member` (a new object, joining with epoch 0) replaces the static member `old` of its instance id:
        `old` goes, its partitions freed, and its target becomes `member`'s (it owns nothing yet)."""
        taken: ConsumerMember = take_static_slot(group.group_id, data, old, member, records, WRITERS,
                                                 release=data.release)
        return taken

    @staticmethod
    def _update_member(member: ConsumerMember, req: ConsumerHeartbeat) -> bool:
        """Take the fields the heartbeat set; whether the subscription changed (the group epoch moves)."""
        changed = False
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        update_common(member, req)
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        if req.subscribed_topic_names is not None:
            names = sorted(set(req.subscribed_topic_names))
            if names != sorted(member.subscribed_topic_names):
                member.subscribed_topic_names = names
                changed = True
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                changed = True
            if req.topic_filter != member.topic_filter:  # another principal or host: what it may see changes
                member.topic_filter = req.topic_filter
                changed = changed or regex is not None
        return changed

    # -- target assignment and reconciliation -----------------------------------------------------------
    def _resolve_regexes(self, data: ConsumerGroupData, topics: TopicMetadata) -> dict[str, set[str]]:
        resolved: dict[str, set[str]] = {}
        for member in data.members.values():
            regex = member.subscribed_topic_regex
            if regex is None or regex in resolved:
                continue
            cached = self._regex_cache.get(regex)
            if cached is None or cached[0] is not topics:
                cached = (topics, matching(regex, topics))
                self._regex_cache[regex] = cached
            resolved[regex] = cached[1]
        return resolved

    def _subscriptions(self, data: ConsumerGroupData, topics: TopicMetadata) -> dict[str, set[str]]:
        resolved = self._resolve_regexes(data, topics)
        #: (principal and host, regex) -> the matched topics that principal may describe
        filtered: dict[tuple[tuple[str, str], str], set[str]] = {}
        subscriptions: dict[str, set[str]] = {}
        for member_id, member in data.members.items():
            names = {n for n in member.subscribed_topic_names if n in topics}
            regex = member.subscribed_topic_regex
            if regex is not None:
                matched = resolved.get(regex, set())
                allowed = member.topic_filter
                if allowed is not None:
                    key = (allowed.key, regex)
                    if key not in filtered:
                        filtered[key] = {t for t in matched if allowed.allowed(t)}
                    matched = filtered[key]
                names |= matched
            subscriptions[member_id] = names
        return subscriptions

    def _subscription_metadata(self, data: ConsumerGroupData) -> dict[str, tuple[uuid.UUID, int]]:
        topics = self.store.topic_metadata()
        names = set().union(*self._subscriptions(data, topics).values()) if data.members else set()
        return {name: topics[name] for name in sorted(names)}

    def _compute_target(self, group: Group, data: ConsumerGroupData, preferred: str | None) -> Records:
        topics = self.store.topic_metadata()
        name = self._assignor_name(data, preferred)
        previous = data.targets
        targets = ASSIGNORS[name](self._subscriptions(data, topics), data.subscription_metadata, previous)
        changed = [m for m in data.members if targets.get(m, {}) != previous.get(m)]
        data.targets = {m: targets.get(m, {}) for m in data.members}
        data.assignment_epoch = data.group_epoch
        data.assignor = name
        log.debug("target assignment computed", group=group.group_id, epoch=data.assignment_epoch,
                  assignor=name, members=len(data.members))
        return rec.target_records(group.group_id, data, changed)

    def _assignor_name(self, data: ConsumerGroupData, preferred: str | None) -> str:
        """The assignor most members asked for (ties: the first configured), else the first configured."""
        votes: dict[str, int] = {}
        for member in data.members.values():
            if member.server_assignor in self.store.config.consumer_assignors:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return self.store.config.consumer_assignors[0]
        order = list(self.store.config.consumer_assignors)
        return max(votes, key=lambda n: (votes[n], -order.index(n)))

    def _reconcile(self, data: ConsumerGroupData, member: ConsumerMember, owned: Assignment | None,
                   now: int) -> None:
        was_revoking = member.state is MemberState.UNREVOKED_PARTITIONS
        if owned and member.pending_revocation:
            # partitions of a deleted topic cannot be revoked by a client that no longer knows the topic
            existing = {topic_id for topic_id, _ in self.store.topic_metadata().values()}
            owned = {topic: parts for topic, parts in owned.items() if topic in existing}
        data.release(member)
        step = reconcile(member, data.assignment_epoch, data.targets.get(member.member_id, {}),
                         data.owner_epoch, owned)
        revocation_changed = step.pending_revocation != member.pending_revocation
        member.assignment_epochs = assignment_epochs(member, step)
        member.member_epoch, member.previous_member_epoch = step.member_epoch, step.previous_member_epoch
        member.state, member.assigned = step.state, step.assigned
        member.pending_revocation = step.pending_revocation
        data.claim(member)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if not was_revoking or revocation_changed:
                member.revocation_deadline_ms = now + max(member.rebalance_timeout_ms, 0)
        else:
            member.revocation_deadline_ms = -1

    # -- leaving and fencing -----------------------------------------------------------------------
    def _consumer_leave(self, req: ConsumerHeartbeat, now: int) -> tuple[Records, ConsumerHeartbeatOutcome]:
        group = self.store.groups.get(req.group_id)
        data = group.consumer if group is not None else None
        if group is None or data is None:
            raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        member = data.members.get(req.member_id)
        if member is None:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {req.member_id} is not a member of group {req.group_id}.")
        if req.instance_id is not None and member.instance_id != req.instance_id:
            raise Refused(ErrorCode.FENCED_INSTANCE_ID)
        outcome = ConsumerHeartbeatOutcome(ErrorCode.NONE, member_id=member.member_id, member_epoch=req.member_epoch,
                                           heartbeat_interval_ms=0)
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # it keeps its partitions for its session timeout, waiting for its instance to come back
            member.member_epoch, member.previous_member_epoch = STATIC_LEAVE_EPOCH, member.member_epoch
            member.last_heartbeat_ms = now
            return [rec.current_record(group.group_id, member)], outcome
        return self.remove_member(group, data, member, "left the group", now), outcome

    def remove_member(self, group: Group, data: ConsumerGroupData, member: ConsumerMember, reason: str,
                      now: int) -> Records:
        def before_epoch() -> None:
            data.subscription_metadata = self._subscription_metadata(data)

        records = remove_member(group, data, member, reason, WRITERS, release=data.release, before_epoch=before_epoch,
                                compute_target=lambda: self._compute_target(group, data, None))
        return records + self.mixed.maybe_downgrade(group, now)

    def tick_consumer(self, group: Group, now: int) -> None:
        """Fence members past their session, or past their revocation deadline."""
        data = group.consumer
        if data is None:
            return
        records = fence_expired(data, now, self._session_ms,
                                lambda member, reason: self.remove_member(group, data, member, reason, now),
                                owns="partitions", still_current=lambda: group.consumer is data)
        if records:
            self.store.append(group.group_id, records, now, lambda _code: None)

    def _session_ms(self, member: ConsumerMember) -> int:
        """A classic member's own session timeout; the broker's for the consumer protocol's members."""
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self.store.config.consumer_session_timeout_ms

    def consumer_deadline(self, group: Group) -> int | None:
        data = group.consumer
        return None if data is None else next_deadline(data, self._session_ms)

    # -- offsets of consumer groups ----------------------------------------------------------------------
    def fetch_member_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9 from a member of a consumer group: it must be a member at that epoch (Kafka's
        check; classic groups and requests naming no member are not checked)."""
        group = self.store.groups.get(group_id)
        data = group.consumer if group is not None else None
        if data is None or (member_id is None and member_epoch < 0):
            return ErrorCode.NONE
        member = data.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE if member.member_epoch == member_epoch else ErrorCode.STALE_MEMBER_EPOCH

    def drop_consumer_part(self, group: Group, now: int) -> None:
        """An empty consumer group taken over by a classic JoinGroup (Kafka's downgrade of an empty group)."""
        data = group.consumer
        assert data is not None and not data.members
        records = rec.group_tombstones(group.group_id, data)
        group.consumer = None
        group.protocol_type = None
        self.store.append(group.group_id, records, now, lambda _code: None)
        log.info("group converted to the classic protocol", group=group.group_id)


def consumer_commit_error(data: ConsumerGroupData, member_id: str, member_epoch: int,
                          api_version: int | None = None,
                          partitions: Iterable[tuple[uuid.UUID, int]] = ()) -> ErrorCode:
    """Kafka's check of a commit to a consumer group: from outside the group (a negative epoch: a tool, a
    consumer without group management) only while it has no member; from a member at its current epoch, or
    (KIP-1251, Kafka 4.3+) at an older one when every partition committed (`partitions`, those that exist,
    by topic id) is still its own and was already its own at that epoch: a member whose epoch moved on while
    its commit was on the way (its assignment grew, or it was asked to revoke some other partition) commits
    what it processed; any other epoch is STALE_MEMBER_EPOCH. A classic member's generation must be its
    epoch (ILLEGAL_GENERATION). A consumer-protocol member's OffsetCommit (`api_version`; None for
    TxnOffsetCommit, which is not checked) must be v9+, the first to carry the member epoch."""
    if member_epoch < 0 and not data.members:
        return ErrorCode.NONE
    member = data.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if api_version is not None and api_version < 9 and member.classic is None:
        return ErrorCode.UNSUPPORTED_VERSION
    if member_epoch == member.member_epoch:
        return ErrorCode.NONE
    if member.classic is not None:  # a classic member's generation is its epoch: told as a classic group would
        return ErrorCode.ILLEGAL_GENERATION
    if member_epoch > member.member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    for topic, partition in partitions:
        if partition not in member.assigned.get(topic, ()) and partition not in member.pending_revocation.get(topic, ()):
            return ErrorCode.STALE_MEMBER_EPOCH
        if member.assignment_epochs.get((topic, partition), member.member_epoch) > member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def _subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(parts <= assigned.get(topic, frozenset()) for topic, parts in owned.items())
