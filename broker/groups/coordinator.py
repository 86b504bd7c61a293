"""The group coordinator: a small object composing its parts, one per responsibility.

- `classic_groups.ClassicGroups`: the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup);
- `consumer_groups.ConsumerGroups`: the consumer protocol (KIP-848, ConsumerGroupHeartbeat);
- `pybroker.broker.streams_groups.streams_groups.StreamsGroups`: the streams protocol (KIP-1071,
  StreamsGroupHeartbeat);
- `mixed_groups.MixedGroups`: classic members in consumer groups, and the conversions between protocols;
- `offset_commits.OffsetCommits`: commits (plain and transactional), fetches, deletes and expiry;
- `loading.GroupLoading`: installing what replaying `__consumer_offsets` found.

Each part is handed the `GroupStore` they share (settings, groups, log, loading partitions), the
`GroupTimers` and the other parts it calls, explicitly; none inherits another. The coordinator keeps the
public names the handlers and the group service call, routes each to its part, and owns what spans them:
ticking a group whose deadline is due (both protocols' deadlines), listing, describing and deleting groups,
and shutdown.

Everything runs on the event loop's thread and takes the time as an argument, so no call ever sleeps and
tests drive timeouts by passing a later `now`. Requests that must wait hand in a callback that is called
exactly once with the outcome; writes go through a `GroupLog` whose completion callback decides whether the
change takes effect, so nothing is acknowledged before it is durable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from pybroker.broker.groups.classic_groups import ClassicGroups, deadline_of
from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.groups.consumer_groups import ConsumerGroups
from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat, ConsumerHeartbeatOutcome
from pybroker.broker.groups.consumer_records import ReplayedConsumerGroup
from pybroker.broker.groups.consumer_records import group_tombstones as consumer_group_tombstones
from pybroker.broker.groups.group import CommittedOffset, Group
from pybroker.broker.groups.group_log import GroupLog, Records, client_error
from pybroker.broker.groups.group_store import GroupStore, TopicMetadata, random_member_id
from pybroker.broker.groups.group_timers import GroupTimers
from pybroker.broker.groups.loading import GroupLoading
from pybroker.broker.groups.mixed_groups import MixedGroups
from pybroker.broker.groups.offset_commits import OffsetCommits, offset_tombstones
from pybroker.broker.groups.outcomes import (
    CommitRequest,
    JoinOutcome,
    JoinRequest,
    SyncOutcome,
    SyncRequest,
    TxnCommitRequest,
)
from pybroker.broker.groups.state_machine import Event, GroupState
from pybroker.broker.streams_groups.outcomes import StreamsHeartbeat, StreamsHeartbeatOutcome
from pybroker.broker.streams_groups.records import ReplayedStreamsGroup
from pybroker.broker.streams_groups.records import group_tombstones as streams_group_tombstones
from pybroker.broker.streams_groups.streams_groups import StreamsGroups
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.coordinator_records import GroupMetadataValue
from pybroker.protocol.offsets_topic_records import group_metadata_key

S = GroupState

OffsetCodes = dict[tuple[str, int], ErrorCode]


class GroupCoordinator:
    def __init__(self, config: GroupConfig, log: GroupLog, *,
                 partition_exists: Callable[[str, int], bool] = lambda topic, partition: True,
                 new_member_id: Callable[[str], str] = random_member_id,
                 topic_metadata: Callable[[], TopicMetadata] = dict) -> None:
        self.store = GroupStore(config, log, partition_exists=partition_exists, new_member_id=new_member_id,
                                topic_metadata=topic_metadata)
        self.timers = GroupTimers(self.store, self._deadline_of)
        self.classic = ClassicGroups(self.store, self.timers)
        self.consumer = ConsumerGroups(self.store, self.timers)
        self.mixed = MixedGroups(self.store, self.timers, self.classic, self.consumer)
        # the classic and consumer parts hand requests to the mixed-groups part, which needs them both
        self.classic.mixed = self.consumer.mixed = self.mixed
        self.classic.consumer = self.consumer
        self.streams = StreamsGroups(self.store, self.timers)
        self.offsets = OffsetCommits(self.store, self.classic)
        self.loader = GroupLoading(self.store, self.timers, self.offsets)

    # -- what the parts share ----------------------------------------------------------------------
    @property
    def config(self) -> GroupConfig:
        return self.store.config

    @config.setter
    def config(self, config: GroupConfig) -> None:
        self.store.config = config

    @property
    def groups(self) -> dict[str, Group]:
        return self.store.groups

    @property
    def loading(self) -> set[int]:
        return self.store.loading

    @property
    def partition_exists(self) -> Callable[[str, int], bool]:
        """Whether a topic's partition exists (a commit to one that does not is refused)."""
        return self.store.partition_exists

    @partition_exists.setter
    def partition_exists(self, exists: Callable[[str, int], bool]) -> None:
        self.store.partition_exists = exists

    @property
    def on_earlier_deadline(self) -> Callable[[int], None] | None:
        """Called with the new earliest deadline when one is scheduled before every other (the timer re-arms)."""
        return self.timers.on_earlier_deadline

    @on_earlier_deadline.setter
    def on_earlier_deadline(self, hook: Callable[[int], None] | None) -> None:
        self.timers.on_earlier_deadline = hook

    def partition_for(self, group_id: str) -> int:
        return self.store.partition_for(group_id)

    def availability(self, group_id: str) -> ErrorCode:
        return self.store.availability(group_id)

    # -- the classic protocol ----------------------------------------------------------------------
    def join(self, req: JoinRequest, now: int, respond: Callable[[JoinOutcome], None]) -> None:
        self.classic.join(req, now, respond)

    def sync(self, req: SyncRequest, now: int, respond: Callable[[SyncOutcome], None]) -> None:
        self.classic.sync(req, now, respond)

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                  now: int) -> ErrorCode:
        return self.classic.heartbeat(group_id, generation, member_id, instance_id, now)

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]], now: int
              ) -> tuple[ErrorCode, list[ErrorCode]]:
        return self.classic.leave(group_id, leaving, now)

    # -- the consumer protocol ---------------------------------------------------------------------
    def consumer_heartbeat(self, req: ConsumerHeartbeat, now: int,
                           respond: Callable[[ConsumerHeartbeatOutcome], None]) -> None:
        self.consumer.consumer_heartbeat(req, now, respond)

    def fetch_member_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is not None and group.streams is not None:
            if member_id is None and member_epoch < 0:
                return ErrorCode.NONE
            member = group.streams.members.get(member_id or "")
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.NONE if member.member_epoch == member_epoch else ErrorCode.STALE_MEMBER_EPOCH
        return self.consumer.fetch_member_error(group_id, member_id, member_epoch)

    # -- the streams protocol ----------------------------------------------------------------------
    def streams_heartbeat(self, req: StreamsHeartbeat, now: int,
                          respond: Callable[[StreamsHeartbeatOutcome], None]) -> None:
        self.streams.heartbeat(req, now, respond)

    # -- offsets -----------------------------------------------------------------------------------
    def commit_offsets(self, req: CommitRequest, now: int, respond: Callable[[OffsetCodes], None]) -> None:
        self.offsets.commit_offsets(req, now, respond)

    def commit_txn_offsets(self, req: TxnCommitRequest, now: int, respond: Callable[[OffsetCodes], None]) -> None:
        self.offsets.commit_txn_offsets(req, now, respond)

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        self.offsets.complete_transaction(offsets_partition, producer_id, commit)

    def unstable_offsets(self, group_id: str) -> set[tuple[str, int]]:
        return self.offsets.unstable_offsets(group_id)

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None
                      ) -> tuple[ErrorCode, dict[tuple[str, int], CommittedOffset | None]]:
        return self.offsets.fetch_offsets(group_id, partitions)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]], now: int,
                       respond: Callable[[ErrorCode, OffsetCodes], None]) -> None:
        self.offsets.delete_offsets(group_id, partitions, now, respond)

    def expire_offsets(self, now: int) -> None:
        self.offsets.expire_offsets(now)

    # -- loading -----------------------------------------------------------------------------------
    def begin_loading(self, partitions: Iterable[int]) -> None:
        self.loader.begin_loading(partitions)

    def finish_loading(self, partition: int, groups: dict[str, GroupMetadataValue | None],
                       offsets: dict[str, dict[tuple[str, int], CommittedOffset]], now: int,
                       pending: dict[str, dict[int, dict[tuple[str, int], CommittedOffset]]] | None = None,
                       consumer: dict[str, ReplayedConsumerGroup] | None = None,
                       streams: dict[str, ReplayedStreamsGroup] | None = None) -> None:
        self.loader.finish_loading(partition, groups, offsets, now, pending, consumer, streams)

    # -- timeouts ----------------------------------------------------------------------------------
    def tick(self, now: int) -> None:
        """Every deadline that has passed by `now`: join phases, sync phases, sessions, pending members.
        Only groups whose timer is due are visited (in the order a scan of every group would take)."""
        due = self.timers.due(now)
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
                self.timers.schedule(group)

    def next_deadline(self) -> int | None:
        """When `tick` has something to do next (None: nothing is timed)."""
        return self.timers.next_deadline()

    def _tick_group(self, group: Group, now: int) -> None:
        self.consumer.tick_consumer(group, now)
        self.streams.tick(group, now)
        self.classic.tick_group(group, now)

    def _deadline_of(self, group: Group) -> int | None:
        """The first `now` at which `tick` would act on the group: its classic or its consumer-protocol deadline."""
        deadline = deadline_of(group)
        for other in (self.consumer.consumer_deadline(group), self.streams.deadline(group)):
            if other is not None:
                deadline = other if deadline is None else min(deadline, other)
        return deadline

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
            records = offset_tombstones(group_id, {*group.offsets, *group.pending_txn_keys()})
            records.append((group_metadata_key(group_id), None))
            if group.consumer is not None:
                records += consumer_group_tombstones(group_id, group.consumer)
                group.consumer.remove()
            if group.streams is not None:
                records += streams_group_tombstones(group_id, group.streams)
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
            self.store.append(group.group_id, records, now, partial(finish, group.group_id))

    def shutdown(self) -> None:
        """Answer every waiting JoinGroup and SyncGroup: this broker stops coordinating (clients look again)."""
        self.classic.shutdown()
