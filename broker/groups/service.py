"""The group coordinator inside the broker: loading at startup, the timer, offset expiry, shutdown.

Owns the pieces the handlers use (`coordinator`, `offsets_topic`), the entry the transaction markers
call (`complete_transaction`), and the two duties that no request triggers: deadlines (sessions, join
and sync phases), on a timer set for the coordinator's next deadline (`next_deadline`, re-armed when a
request brings one forward), so idle groups cost nothing between their deadlines; and offset expiry
every `offsets.retention.check.interval.ms`, Kafka's periodic check.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.broker.groups.coordinator import GroupConfig, GroupCoordinator
from pybroker.broker.groups.offsets_topic import OFFSETS_TOPIC, OffsetsTopic, replay
from pybroker.broker.loggers.structlog_setup import get_logger

if TYPE_CHECKING:
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
    from pybroker.config.broker_config import BrokerConfig

log = get_logger("pybroker.groups")

#: a timer that fires a hair early (clock granularity) looks again after this long
MIN_WAIT_S = 0.001


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
        consumer_assignors=tuple(dict.fromkeys(ASSIGNOR_NAMES.get(name, name)
                                               for name in config.get("group.consumer.assignors"))),
    )


#: Kafka's assignor class names -> ours
ASSIGNOR_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                  "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def _within(config: Any, key: str, low_key: str, high_key: str) -> int:
    """A value clamped to its min and max keys (Kafka refuses a broker config outside them; we clamp)."""
    return max(int(config.get(low_key)), min(int(config.get(key)), int(config.get(high_key))))


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
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        #: set when the coordinator schedules a deadline earlier than the one the timer waits for
        self._rearm = asyncio.Event()
        self.coordinator.on_earlier_deadline = lambda _deadline: self._rearm.set()

    def start(self) -> None:
        """Begin loading the offsets topic (requests for its groups wait until their partition is in)."""
        info = self.partitions.topic(OFFSETS_TOPIC)
        if info is not None and info.num_partitions != self.offsets_topic.num_partitions:
            # the records are where the existing topic put them: follow its partition count
            self.offsets_topic.num_partitions = info.num_partitions
            self.coordinator.config = group_config(self.config, info.num_partitions)
        if info is not None:
            self.coordinator.begin_loading(range(info.num_partitions))
        self._tasks = [asyncio.create_task(self._load(info is not None)),
                       asyncio.create_task(self._tick())]

    async def _load(self, exists: bool) -> None:
        if not exists:
            return
        started = time.monotonic()
        groups = records = 0
        for partition in sorted(self.coordinator.loading):
            partition_log = self.partitions.log_for_replay(OFFSETS_TOPIC, partition)
            if partition_log is None:
                self.coordinator.finish_loading(partition, {}, {}, self.clock_ms())
                continue
            try:
                replayed = await asyncio.to_thread(replay, partition_log)
            except Exception as exc:  # a partition we cannot read stays loading: its groups get a retriable code
                log.error("cannot load offsets partition", partition=partition, error=repr(exc))
                continue
            self.coordinator.finish_loading(partition, replayed.groups, replayed.offsets, self.clock_ms(),
                                            replayed.pending, replayed.consumer)
            groups += len(set(replayed.groups) | set(replayed.offsets) | set(replayed.pending) | set(replayed.consumer))
            records += replayed.records
        log.info("group coordinator loaded", groups=groups, records=records,
                 seconds=round(time.monotonic() - started, 3))

    async def _tick(self) -> None:
        interval_s = int(self.config.get("offsets.retention.check.interval.ms")) / 1000
        last_expiry = time.monotonic()
        while not self._stopping.is_set():
            wait_s = last_expiry + interval_s - time.monotonic()
            deadline = self.coordinator.next_deadline()
            if deadline is not None:
                wait_s = min(wait_s, (deadline - self.clock_ms()) / 1000)
            self._rearm.clear()
            if wait_s > 0:
                await self._sleep(max(wait_s, MIN_WAIT_S))
            if self._stopping.is_set():
                return
            try:
                now = self.clock_ms()
                self.coordinator.tick(now)
                if time.monotonic() - last_expiry >= interval_s:
                    last_expiry = time.monotonic()
                    self.coordinator.expire_offsets(now)
            except Exception:
                log.exception("group coordinator timer failed")

    async def _sleep(self, seconds: float) -> None:
        """Until `seconds` pass, the service stops, or an earlier deadline is scheduled."""
        waits = {asyncio.ensure_future(self._stopping.wait()), asyncio.ensure_future(self._rearm.wait())}
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """Called once a transaction's marker is durable in `offsets_partition` of `__consumer_offsets`:
        a commit makes the producer's pending offsets of that partition's groups visible as committed
        offsets (each where it was written after the committed one, Kafka's rule); an abort drops them.
        Synchronous and in memory: the marker on disk is what replay follows after a restart."""
        self.coordinator.complete_transaction(offsets_partition, producer_id, commit)

    def snapshot(self) -> list[GroupSnapshot]:
        """Every loaded group, read from the coordinator's own state (cheap enough for a scrape)."""
        return [GroupSnapshot(g.group_id, g.state_name, len(g.members) + (len(g.consumer.members) if g.consumer else 0),
                              {key: c.offset for key, c in g.offsets.items()})
                for g in self.coordinator.list_groups()]

    async def stop(self) -> None:
        self._stopping.set()
        self.coordinator.shutdown()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
