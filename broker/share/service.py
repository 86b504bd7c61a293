"""The share groups inside the broker (KIP-932): membership, share sessions, share-partitions and their
durable state, wired together, with the coordinator runtime that loads `__share_group_state` at startup
and runs the timer (acquisition locks that run out, members whose session expired).

The handlers (`broker/handlers/share_*.py`) call this: `heartbeat`, `share_partition` (made on first use,
starting where `share.auto.offset.reset` says), `release_member`, and `persist`, which writes the
share-partitions a request changed and returns once they are fsynced, so that no answer acknowledges a
state a crash could lose. While `__share_group_state` is being read back, `loading` is true and the
handlers answer COORDINATOR_LOAD_IN_PROGRESS. The membership lives in `__consumer_offsets`, written through
the group coordinator's log (`write_group`, fsynced before a heartbeat is answered) and handed back by
its loading (`install_groups`); while a group's partition loads, `group_loading` is true for it.

Threads: the event loop only (the replay runs in a thread through the runtime).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from pybroker.broker.coordinator.runtime import CoordinatorRuntime, Deadlines, Replay
from pybroker.broker.groups.group_log import Records, client_error
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
from pybroker.broker.share import reset_strategy
from pybroker.broker.share.config import ShareConfig
from pybroker.broker.share.group_configs import FILE_NAME as GROUP_CONFIGS_FILE
from pybroker.broker.share.group_configs import SHARE_KEYS, GroupConfigs
from pybroker.broker.share.share_group_log import (
    ReplayedShareGroup,
    Written,
    changes,
    group_tombstones,
    restore_share_group,
)
from pybroker.broker.share.share_groups import ShareGroups
from pybroker.broker.share.share_partition import SharePartition
from pybroker.broker.share.share_sessions import ShareSessionCache
from pybroker.broker.share.share_state_topic import ReplayedShares, ShareKey, ShareStateTopic, replay
from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker.detached_work import DetachedWork
    from pybroker.broker.groups.service import GroupService
    from pybroker.broker.partitions.manager import ReplicaManager
    from pybroker.config.broker_config import BrokerConfig

log = get_logger("pybroker.share")
#: a partition's (offset, timestamp) of its first record at or after a timestamp, or None (`Log.offset_for_timestamp`)
OffsetForTime = Callable[[int], "tuple[int, int] | None"]



class _LoadedShares:
    """The service as the runtime's loading sees it."""

    def __init__(self, service: ShareService) -> None:
        self.service = service
        self.loading: set[int] = set()

    def begin_loading(self, partitions: Iterable[int]) -> None:
        self.loading.update(partitions)

    def install(self, partition: int, replayed: ReplayedShares | None) -> int:
        self.loading.discard(partition)
        if replayed is None:
            return 0
        return self.service.install(replayed)


class ShareService:
    def __init__(self, config: BrokerConfig, clock_ms: Callable[[], int], replicas: ReplicaManager,
                 group_service: GroupService | None = None, *, detached: DetachedWork) -> None:
        self.config = ShareConfig.from_config(config)
        self.clock_ms = clock_ms
        self.replicas = replicas
        self.logs = replicas.logs
        self.groups = ShareGroups(self.config, self._topic)
        self.sessions = ShareSessionCache(self.config.max_share_sessions)
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._epochs: dict[ShareKey, int] = {}
        #: the share configs of groups, set with IncrementalAlterConfigs (resource type GROUP); read at `open`
        self.group_configs = GroupConfigs(None)
        self.state_topic = ShareStateTopic(CoordinatorPartitions(config, clock_ms, replicas, detached=detached))
        self._loaded = _LoadedShares(self)
        self.runtime: CoordinatorRuntime[ReplayedShares] = CoordinatorRuntime(
            "share coordinator", self.state_topic, self._loaded, Replay(replay, lambda r: r.records),
            clock_ms=clock_ms, deadlines=Deadlines(self.tick, self.next_deadline), logger="pybroker.share",
            loaded_key="share_partitions")
        self._background: set[asyncio.Task[ErrorCode]] = set()
        #: (group, member) that left -> when its share session is dropped if the client never closed it
        self._departed: dict[tuple[str, str], int] = {}
        #: the group coordinator, whose `__consumer_offsets` holds the share groups' membership (None: kept
        #: in memory only, for tests of the parts)
        self.group_service = group_service
        #: group id -> what `__consumer_offsets` holds of it
        self._written: dict[str, Written] = {}
        if group_service is not None:
            group_service.loaded.on_share_groups = self.install_groups

    @property
    def loading(self) -> bool:
        return bool(self._loaded.loading)

    def group_loading(self, group_id: str) -> bool:
        """Is the `__consumer_offsets` partition of `group_id` (its membership) still being read back?"""
        if self.group_service is None:
            return False
        store = self.group_service.coordinator.store
        return store.partition_for(group_id) in store.loading

    # -- membership in __consumer_offsets -----------------------------------------------------------
    def install_groups(self, replayed: dict[str, ReplayedShareGroup]) -> None:
        """The share groups one `__consumer_offsets` partition held (its loading, on the event loop): each
        member's session starts again now."""
        deadline = self.clock_ms() + self.config.session_timeout_ms
        for group_id, found in replayed.items():
            if not found.exists:
                continue
            group, written = restore_share_group(group_id, found, deadline)
            self.groups.groups[group_id] = group
            self._written[group_id] = written
        self.scheduled()

    async def write_group(self, group_id: str) -> ErrorCode:
        """Write what changed in `group_id`'s membership since the last write; returns once it is fsynced."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        records, after = changes(group, self._written.get(group_id, Written()))
        if not records:
            return ErrorCode.NONE
        self._written[group_id] = after
        code = await self._append(group_id, records)
        if code is not ErrorCode.NONE:
            self._written.pop(group_id, None)  # the next write rewrites the whole group
        return code

    def write_group_later(self, group_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self.write_group(group_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _append(self, group_id: str, records: Records) -> ErrorCode:
        if self.group_service is None:
            return ErrorCode.NONE
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

        def done(code: ErrorCode) -> None:
            if not future.done():
                future.set_result(code)

        self.group_service.coordinator.store.append(group_id, records, self.clock_ms(), done)
        return client_error(await future)

    def _topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        info = self.logs.topics().get(name)
        return None if info is None else (info.topic_id, info.num_partitions)

    def group_config(self, group_id: str, key: str) -> str:
        return self.group_configs.get(group_id, key) or self.config_defaults()[key]

    def config_defaults(self) -> dict[str, str]:
        defaults = {key: default for key, (default, _check) in SHARE_KEYS.items()}
        defaults["share.record.lock.duration.ms"] = str(self.config.record_lock_duration_ms)
        defaults["share.delivery.count.limit"] = str(self.config.delivery_count_limit)
        defaults["share.partition.max.record.locks"] = str(self.config.max_record_locks)
        return defaults

    def _limits(self, group_id: str) -> dict[str, int]:
        """A share-partition's settings: the group's configs over the broker's."""
        return {"lock_duration_ms": self.lock_duration_ms(group_id),
                "delivery_count_limit": int(self.group_config(group_id, "share.delivery.count.limit")),
                "max_in_flight": int(self.group_config(group_id, "share.partition.max.record.locks"))}

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id, "share.record.lock.duration.ms"))

    # -- share-partitions ---------------------------------------------------------------------------
    def share_partition(self, key: ShareKey, log_start: int, high_watermark: int,
                        offset_for_time: OffsetForTime | None = None) -> SharePartition:
        """The share-partition of `key`, made on first use at the offset `share.auto.offset.reset` says
        (`offset_for_time`: the partition's first record at or after a timestamp, for `by_duration`)."""
        share = self.partitions.get(key)
        if share is None:
            start = self._start_offset(key[0], log_start, high_watermark, offset_for_time)
            share = SharePartition(start, **self._limits(key[0]))
            self.partitions[key] = share
        limits = self._limits(key[0])  # a group config changed since: the share-partition follows it
        share.lock_duration_ms = limits["lock_duration_ms"]
        share.delivery_count_limit = limits["delivery_count_limit"]
        share.max_in_flight = limits["max_in_flight"]
        share.log_start_moved(log_start)
        return share

    def _start_offset(self, group_id: str, log_start: int, high_watermark: int,
                      offset_for_time: OffsetForTime | None) -> int:
        strategy = reset_strategy.parse(self.group_config(group_id, "share.auto.offset.reset")) or reset_strategy.LATEST
        if strategy is reset_strategy.EARLIEST:
            return log_start
        if strategy.kind != "by_duration" or offset_for_time is None:
            return high_watermark
        try:
            found = offset_for_time(strategy.timestamp(self.clock_ms()))
        except OSError as exc:  # the time index could not be read: the partition's own reads will say so
            log.warning("share-partition start by time not found", group=group_id, error=str(exc))
            return high_watermark
        # no record that recent (or none yet fetchable): the end, where the next record will be
        return high_watermark if found is None else min(max(found[0], log_start), high_watermark)

    def install(self, replayed: ReplayedShares) -> int:
        for key, durable in replayed.states.items():
            if durable is None:
                self.partitions.pop(key, None)
                continue
            self.partitions[key] = SharePartition.restore(durable.start_offset, durable.batches, **self._limits(key[0]))
            self._epochs[key] = durable.snapshot_epoch
        return sum(1 for durable in replayed.states.values() if durable is not None)

    async def persist(self, keys: Iterable[ShareKey]) -> ErrorCode:
        """Write the share-partitions of `keys` and return once they are fsynced."""
        snapshots: dict[ShareKey, tuple[SharePartition, int]] = {}
        for key in keys:
            share = self.partitions.get(key)
            if share is not None:
                epoch = self._epochs[key] = self._epochs.get(key, 0) + 1
                snapshots[key] = (share, epoch)
        return await self.state_topic.write(snapshots)

    def persist_later(self, keys: Iterable[ShareKey]) -> None:
        """Persist without an answer waiting on it (a lock that ran out, a member gone)."""
        keys = list(keys)
        if not keys:
            return
        task = asyncio.get_running_loop().create_task(self.persist(keys))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def release_member(self, group_id: str, member_id: str, keys: Iterable[ShareKey] | None = None) -> list[ShareKey]:
        """Make what `member_id` holds available again (on the given share-partitions, or all of the group's)."""
        changed: list[ShareKey] = []
        chosen = keys if keys is not None else [k for k in self.partitions if k[0] == group_id]
        for key in chosen:
            share = self.partitions.get(key)
            if share is not None and share.release_member(member_id):
                changed.append(key)
                self._wake(key)
        return changed

    def acknowledge(self, key: ShareKey, member_id: str, batches: Iterable[tuple[int, int, list[int]]],
                    now_ms: int) -> ErrorCode:
        """Apply a partition's acknowledgement batches in order; the first refused one stops them. A topic id
        no longer served (the topic was deleted, or deleted and created again under a new id) answers
        UNKNOWN_TOPIC_ID, as a fetch of it does, whatever share state the old topic left behind: the client
        learns its acknowledgements went nowhere instead of being told they succeeded."""
        if self.logs.topic_by_id(key[1]) is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        share = self.partitions.get(key)
        if share is None:
            return ErrorCode.INVALID_RECORD_STATE
        code = ErrorCode.NONE
        for first, last, types in batches:
            code = share.acknowledge(member_id, first, last, types, now_ms)
            if code is not ErrorCode.NONE:
                break
        self._wake(key)
        return code

    def _wake(self, key: ShareKey) -> None:
        """Records became available again: wake share fetches waiting on the partition."""
        info = self.logs.topic_by_id(key[1])
        if info is not None:
            self.replicas.purgatory.notify((info.name, key[2]))

    # -- membership ---------------------------------------------------------------------------------
    def member_departed(self, group_id: str, member_id: str, now_ms: int) -> None:
        """A member left with ShareGroupHeartbeat: its client sends its last acknowledgements next (final
        epoch); a session still open a lock duration later is dropped and what it held released, so a client
        that left and died cannot keep a session slot."""
        self._departed[(group_id, member_id)] = now_ms + self.config.record_lock_duration_ms

    def member_left(self, group_id: str, member_id: str) -> None:
        self.sessions.drop_member(group_id, member_id)
        self.persist_later(self.release_member(group_id, member_id))

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: refused while it has members; its share-partitions are
        tombstoned in `__share_group_state` (fsynced) before the answer."""
        code = self.groups.delete(group_id)
        if code is not ErrorCode.NONE:
            return code
        written = self._written.pop(group_id, None)
        if written is not None:
            code = await self._append(group_id, group_tombstones(group_id, written))
            if code is not ErrorCode.NONE:
                return code
        keys = [key for key in self.partitions if key[0] == group_id]
        for key in keys:
            del self.partitions[key]
            self._epochs.pop(key, None)
        return await self.state_topic.tombstone(keys)

    # -- the offsets APIs ----------------------------------------------------------------------------
    def group_partitions(self, group_id: str) -> dict[tuple[uuid.UUID, int], SharePartition]:
        return {(key[1], key[2]): share for key, share in self.partitions.items() if key[0] == group_id}

    def lag(self, share: SharePartition, high_watermark: int) -> int:
        """Records from the start offset to the high watermark not yet done (DescribeShareGroupOffsets v1)."""
        return max(0, high_watermark - share.start_offset - share.delivery_complete_count())

    def alter_offset(self, group_id: str, topic_id: uuid.UUID, partition: int, offset: int, log_start: int,
                     high_watermark: int) -> ShareKey:
        """Start the share-partition again at `offset` (kept within the log), nothing in flight; the group
        is made (empty) when it is not there, as Kafka's `--reset-offsets` does."""
        self.groups.ensure(group_id)
        key = (group_id, topic_id, partition)
        share = self.share_partition(key, log_start, high_watermark)
        share.reset(min(max(offset, log_start), high_watermark))
        return key

    async def delete_offsets(self, group_id: str, topic_id: uuid.UUID) -> ErrorCode:
        keys = [key for key in self.partitions if key[0] == group_id and key[1] == topic_id]
        for key in keys:
            del self.partitions[key]
            self._epochs.pop(key, None)
        group = self.groups.get(group_id)
        if group is not None and group.initialized.pop(topic_id, None) is not None:
            code = await self.write_group(group_id)
            if code is not ErrorCode.NONE:
                return code
        return await self.state_topic.tombstone(keys)

    # -- the timer ----------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        expired: list[ShareKey] = []
        for key, share in self.partitions.items():
            if share.expire_locks(now_ms):
                expired.append(key)
                self._wake(key)
        self.persist_later(expired)
        for group_id, member_id in self.groups.expire(now_ms):
            log.info("share group member expired", group=group_id, member=member_id)
            self.member_left(group_id, member_id)
            self.write_group_later(group_id)
        for (group_id, member_id), due in list(self._departed.items()):
            if due <= now_ms:
                del self._departed[(group_id, member_id)]
                group = self.groups.get(group_id)
                if group is None or member_id not in group.members:
                    self.member_left(group_id, member_id)

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (s.next_deadline() for s in self.partitions.values()) if d is not None]
        member = self.groups.next_deadline()
        if member is not None:
            deadlines.append(member)
        deadlines.extend(self._departed.values())
        return min(deadlines, default=None)

    def scheduled(self) -> None:
        """A new lock or session deadline may be earlier than the one the timer sleeps to."""
        self.runtime.earlier_deadline()

    # -- lifecycle ----------------------------------------------------------------------------------
    def open(self, first_log_dir: Path) -> None:
        """Read the group configs (startup, before any request)."""
        self.group_configs = GroupConfigs(first_log_dir / GROUP_CONFIGS_FILE)

    def start(self) -> None:
        self.runtime.start()

    async def stop(self) -> None:
        async def drain() -> None:
            if self._background:
                await asyncio.gather(*self._background, return_exceptions=True)

        await self.runtime.stop(drain)
