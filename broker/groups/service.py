"""The group coordinator inside the broker: its coordinator, its topic and its runtime, wired together.

Owns the pieces the handlers use (`coordinator`, `offsets_topic`), the two entries the transaction
coordinator calls (`partition_for`, `complete_transaction`: `transactions.markers.TransactionOffsets`), and hands the shared coordinator runtime (`pybroker.broker.coordinator`)
the two duties that no request triggers: deadlines (sessions, join and sync phases), on a timer set for
the coordinator's next deadline (`next_deadline`, re-armed when a request brings one forward), so idle
groups cost nothing between their deadlines; and offset expiry every
`offsets.retention.check.interval.ms`, Kafka's periodic check. Loading `__consumer_offsets` at startup is
the runtime's too. Everything runs on the event loop's thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.broker.coordinator.runtime import CoordinatorRuntime, Deadlines, Periodic, Replay
from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.groups.coordinator import GroupCoordinator
from pybroker.broker.groups.offsets_topic import OffsetsTopic, ReplayedPartition, replay
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.share.share_group_log import ReplayedShareGroup
from pybroker.config.broker_config import validate_topic_overrides
from pybroker.config.types import ConfigError

if TYPE_CHECKING:
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
    from pybroker.config.broker_config import BrokerConfig


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """One group as metrics and tools see it: state, member count and committed offsets."""

    group_id: str
    state: str
    members: int
    committed: dict[tuple[str, int], int]


def group_config(config: BrokerConfig, num_partitions: int) -> GroupConfig:
    retention_ms = config.get("offsets.retention.ms")
    if retention_ms is None:
        retention_ms = int(config.get("offsets.retention.minutes")) * 60_000
    return GroupConfig(
        num_partitions=num_partitions,
        initial_rebalance_delay_ms=int(config.get("group.initial.rebalance.delay.ms")),
        min_session_timeout_ms=int(config.get("group.min.session.timeout.ms")),
        max_session_timeout_ms=int(config.get("group.max.session.timeout.ms")),
        max_size=int(config.get("group.max.size")),
        metadata_max_bytes=int(config.get("offset.metadata.max.bytes")),
        offsets_retention_ms=int(retention_ms),
        consumer_protocol_enabled="consumer" in config.get("group.coordinator.rebalance.protocols"),
        consumer_heartbeat_interval_ms=_within(config, "group.consumer.heartbeat.interval.ms",
                                               "group.consumer.min.heartbeat.interval.ms",
                                               "group.consumer.max.heartbeat.interval.ms"),
        consumer_session_timeout_ms=_within(config, "group.consumer.session.timeout.ms",
                                            "group.consumer.min.session.timeout.ms",
                                            "group.consumer.max.session.timeout.ms"),
        consumer_max_size=int(config.get("group.consumer.max.size")),
        consumer_migration_policy=str(config.get("group.consumer.migration.policy")),
        streams_protocol_enabled="streams" in config.get("group.coordinator.rebalance.protocols"),
        streams_heartbeat_interval_ms=int(config.get("group.streams.heartbeat.interval.ms")),
        streams_session_timeout_ms=int(config.get("group.streams.session.timeout.ms")),
        streams_max_size=int(config.get("group.streams.max.size")),
        streams_num_standby_replicas=int(config.get("group.streams.num.standby.replicas")),
        streams_min_session_timeout_ms=int(config.get("group.streams.min.session.timeout.ms")),
        streams_max_session_timeout_ms=int(config.get("group.streams.max.session.timeout.ms")),
        streams_min_heartbeat_interval_ms=int(config.get("group.streams.min.heartbeat.interval.ms")),
        streams_max_heartbeat_interval_ms=int(config.get("group.streams.max.heartbeat.interval.ms")),
        streams_max_standby_replicas=int(config.get("group.streams.max.standby.replicas")),
        streams_initial_rebalance_delay_ms=int(config.get("group.streams.initial.rebalance.delay.ms")),
        streams_rack_aware_assignment_tags=tuple(config.get("group.streams.rack.aware.assignment.tags") or ()),
        consumer_assignors=tuple(dict.fromkeys(ASSIGNOR_NAMES.get(name, name)
                                               for name in config.get("group.consumer.assignors"))),
    )


#: Kafka's assignor class names -> ours
ASSIGNOR_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                  "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def _within(config: Any, key: str, low_key: str, high_key: str) -> int:
    """A value clamped to its min and max keys (Kafka refuses a broker config outside them; we clamp)."""
    return max(int(config.get(low_key)), min(int(config.get(key)), int(config.get(high_key))))


_log = get_logger("pybroker.groups")


class _TopicTable:
    """Topic name -> (id, partitions) for the consumer protocol, rebuilt only when the topics changed."""

    def __init__(self, partitions: CoordinatorPartitions) -> None:
        self.partitions = partitions
        self._source: tuple[object, int] = (None, 0)
        self._table: dict[str, tuple[uuid.UUID, int]] = {}

    def __call__(self) -> dict[str, tuple[uuid.UUID, int]]:
        topics = self.partitions.topics()
        # the log manager replaces its dict when topics come or go; added partitions change the sum
        source = (topics, sum(info.num_partitions for info in topics.values()))
        if source[0] is not self._source[0] or source[1] != self._source[1]:
            self._table = {name: (info.topic_id, info.num_partitions) for name, info in topics.items()}
            self._source = source
        return self._table


class _LoadedGroups:
    """The coordinator as the runtime's loading sees it: a replayed offsets partition installed at `clock_ms()`."""

    def __init__(self, coordinator: GroupCoordinator, clock_ms: Callable[[], int]) -> None:
        self.coordinator = coordinator
        self.clock_ms = clock_ms
        #: the share coordinator's hand for the share groups a partition held (`ShareService.install_groups`)
        self.on_share_groups: Callable[[dict[str, ReplayedShareGroup]], None] | None = None

    @property
    def loading(self) -> set[int]:
        return self.coordinator.loading

    def begin_loading(self, partitions: Iterable[int]) -> None:
        self.coordinator.begin_loading(partitions)

    def install(self, partition: int, replayed: ReplayedPartition | None) -> int:
        if replayed is None:
            self.coordinator.finish_loading(partition, {}, {}, self.clock_ms())
            return 0
        self.coordinator.finish_loading(partition, replayed.groups, replayed.offsets, self.clock_ms(),
                                        replayed.pending, replayed.consumer, replayed.streams)
        if replayed.share and self.on_share_groups is not None:
            self.on_share_groups(replayed.share)
        return len(set(replayed.groups) | set(replayed.offsets) | set(replayed.pending) | set(replayed.consumer)
                   | set(replayed.streams) | set(replayed.share))


class GroupService:
    def __init__(self, partitions: CoordinatorPartitions) -> None:
        #: all the service may touch of the broker: partitions, the config and the clock
        self.partitions = partitions
        self.config = partitions.config
        self.clock_ms = partitions.clock_ms
        self.offsets_topic = OffsetsTopic(partitions)
        self.coordinator = GroupCoordinator(
            group_config(self.config, self.offsets_topic.num_partitions), self.offsets_topic,
            partition_exists=partitions.partition_exists,
            topic_metadata=_TopicTable(partitions))
        #: the runtime's view of the coordinator; the share coordinator sets its `on_share_groups`
        self.loaded = _LoadedGroups(self.coordinator, self.clock_ms)
        # deadlines (sessions, join and sync phases) on the coordinator's own timer; offset expiry every
        # offsets.retention.check.interval.ms, Kafka's periodic check
        self.runtime = CoordinatorRuntime(
            "group coordinator", self.offsets_topic, self.loaded,
            Replay(replay, lambda replayed: replayed.records), clock_ms=self.clock_ms,
            periodic=[Periodic(int(self.config.get("offsets.retention.check.interval.ms")) / 1000,
                               self.coordinator.expire_offsets)],
            deadlines=Deadlines(self.coordinator.tick, self.coordinator.next_deadline),
            on_partition_count=self._follow_partition_count, logger="pybroker.groups", loaded_key="groups")
        self.coordinator.on_earlier_deadline = self.runtime.earlier_deadline
        self.coordinator.streams.create_topics = self._create_internal_topics

    def _create_internal_topics(self, topics: dict[str, tuple[int, dict[str, str], int]]) -> None:
        """A streams group's missing repartition and changelog topics, made on a worker thread (the group sees
        them in the topic table at its next heartbeat; a name that failed may be asked for again then). The
        broker's stop waits for it (`broker/detached_work.py`)."""
        self.partitions.detached.run(self._create_blocking, topics,
                                     then=lambda: self.coordinator.streams.creating.difference_update(topics))

    def _create_blocking(self, topics: dict[str, tuple[int, dict[str, str], int]]) -> None:
        for name, (partitions, configs, _replication) in sorted(topics.items()):
            try:
                overrides = validate_topic_overrides(configs)
            except ConfigError as exc:  # a key this broker does not know: the topic is made without them
                _log.warning("internal topic configs refused", topic=name, error=str(exc))
                overrides = {}
            try:
                self.partitions.create_topic(name, partitions, overrides)
                _log.info("streams internal topic created", topic=name, partitions=partitions)
            except Exception as exc:
                _log.warning("streams internal topic not created", topic=name, error=str(exc))

    def _follow_partition_count(self, num_partitions: int) -> None:
        self.coordinator.config = group_config(self.config, num_partitions)

    def start(self) -> None:
        """Begin loading the offsets topic (requests for its groups wait until their partition is in)."""
        self.runtime.start()

    def partition_for(self, group_id: str) -> int:
        """The partition of `__consumer_offsets` that holds `group_id` (TxnOffsetCommit's transaction check)."""
        return self.coordinator.partition_for(group_id)

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """Called once a transaction's marker is durable in `offsets_partition` of `__consumer_offsets`:
        a commit makes the producer's pending offsets of that partition's groups visible as committed
        offsets (each where it was written after the committed one, Kafka's rule); an abort drops them.
        Synchronous and in memory: the marker on disk is what replay follows after a restart."""
        self.coordinator.complete_transaction(offsets_partition, producer_id, commit)

    def snapshot(self) -> list[GroupSnapshot]:
        """Every loaded group, read from the coordinator's own state (cheap enough for a scrape)."""
        return [GroupSnapshot(g.group_id, g.state_name, len(g.members) + (len(g.consumer.members) if g.consumer else 0)
                              + (len(g.streams.members) if g.streams else 0),
                              {key: c.offset for key, c in g.offsets.items()})
                for g in self.coordinator.list_groups()]

    async def stop(self) -> None:
        await self.runtime.stop(self.coordinator.shutdown)
