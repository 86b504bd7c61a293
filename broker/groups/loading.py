"""Installing what replaying `__consumer_offsets` found, one partition at a time: a part of the group coordinator.

Until its partition is in, a group's requests get COORDINATOR_LOAD_IN_PROGRESS (`loading`). A group comes
back as its last records left it: classic (`restore.restore_group`) or of the consumer protocol
(`consumer_records.restore_consumer`) or a streams group (`streams_groups.records.restore_streams`), with its committed offsets and the pending ones of transactions
with no marker yet. Handed the store, the timers and the offsets part; event loop's thread only (the
replay itself ran in a thread, `pybroker.broker.coordinator.runtime`).
"""

from __future__ import annotations

from collections.abc import Iterable

from pybroker.broker.groups.consumer_records import ReplayedConsumerGroup, restore_consumer
from pybroker.broker.groups.group import CommittedOffset, Group
from pybroker.broker.groups.group_store import GroupStore
from pybroker.broker.groups.group_timers import GroupTimers
from pybroker.broker.groups.offset_commits import OffsetCommits
from pybroker.broker.groups.restore import restore_group
from pybroker.broker.streams_groups.records import ReplayedStreamsGroup, restore_streams
from pybroker.protocol.messages.coordinator_records import GroupMetadataValue


class GroupLoading:
    def __init__(self, store: GroupStore, timers: GroupTimers, offsets: OffsetCommits) -> None:
        self.store = store
        #: a loaded group's deadlines (restored members' sessions) are timed as any group's
        self.timers = timers
        #: the offsets part: a loaded group's open transactions, and completions that waited for the load
        self.offsets = offsets

    def begin_loading(self, partitions: Iterable[int]) -> None:
        self.store.loading.update(partitions)

    def finish_loading(self, partition: int, groups: dict[str, GroupMetadataValue | None],
                       offsets: dict[str, dict[tuple[str, int], CommittedOffset]], now: int,
                       pending: dict[str, dict[int, dict[tuple[str, int], CommittedOffset]]] | None = None,
                       consumer: dict[str, ReplayedConsumerGroup] | None = None,
                       streams: dict[str, ReplayedStreamsGroup] | None = None) -> None:
        """Install what replaying one offsets-topic partition found (committed offsets, and the pending
        ones of transactions with no marker yet); its groups are then served."""
        pending = pending or {}
        consumer = {g: c for g, c in (consumer or {}).items() if c.exists}
        streams = {g: c for g, c in (streams or {}).items() if c.exists}
        for group_id in set(groups) | set(offsets) | set(pending) | set(consumer) | set(streams):
            value = groups.get(group_id)
            group_offsets = offsets.get(group_id, {})
            group_pending = dict(pending.get(group_id, {}))
            replayed = consumer.get(group_id)
            replayed_streams = streams.get(group_id)
            if value is None and not group_offsets and not group_pending and replayed is None \
                    and replayed_streams is None:
                continue
            group = Group(group_id, state_timestamp_ms=now)
            group.offsets = dict(group_offsets)
            group.pending_txn = group_pending
            for producer_id in group_pending:
                self.offsets.txn_groups.setdefault(producer_id, set()).add(group_id)
            if replayed_streams is not None:
                group.protocol_type = "streams"
                group.streams = restore_streams(replayed_streams, now)
            elif replayed is not None:
                group.protocol_type = "consumer"
                group.consumer = restore_consumer(replayed, now)
            elif value is not None:
                restore_group(group, value, now)
            else:
                group.protocol_type = ""
            self.store.groups[group_id] = group
            self.timers.schedule(group)
        self.store.loading.discard(partition)
        for producer_id, commit in self.offsets.deferred_completions.pop(partition, []):
            self.offsets.complete_transaction(partition, producer_id, commit)
