"""What the coordinators' internal topics (`__consumer_offsets`, `__transaction_state`) share.

Both are compacted topics the broker makes on first use, with Kafka's settings and the partition count of a
broker config, and both are read back whole at startup to rebuild the coordinator's state. The group and
transaction coordinators differ in the records they keep and how they write them, not in this.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.records.batch import BatchHeader, iter_batches
from pybroker.storage.errors import TopicExistsError

if TYPE_CHECKING:
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
    from pybroker.storage.log import Log

log = get_logger("pybroker.internal_topics")

#: a replay reads this much of a partition at a time
READ_CHUNK_BYTES = 1 << 20


class InternalTopic:
    """An internal compacted topic, created the first time it is needed (`ensure`, blocking: run it in a
    thread, since creating 50 partitions touches many files)."""

    def __init__(self, partitions: CoordinatorPartitions, name: str, *, partitions_key: str, segment_bytes_key: str,
                 compression: str) -> None:
        #: all a coordinator's writer may touch: its topic's partitions, the config and the clock
        self.partitions = partitions
        self.name = name
        config = partitions.config
        self.num_partitions = int(config.get(partitions_key))
        self._configs = {"cleanup.policy": "compact", "segment.bytes": str(config.get(segment_bytes_key)),
                         "compression.type": compression}

    def exists(self) -> bool:
        return self.partitions.topic(self.name) is not None

    def ensure(self) -> None:
        if self.exists():
            return
        try:
            self.partitions.create_topic(self.name, self.num_partitions, dict(self._configs))
        except TopicExistsError:
            return
        log.info("created internal topic", topic=self.name, partitions=self.num_partitions)


def batches_of(partition_log: Log) -> Iterator[tuple[bytes, int, BatchHeader, int]]:
    """Every batch of a partition from its log start to its high watermark, as (the bytes read, the batch's
    position in them, its header, the offset that read started at: records below it were read before)."""
    offset = partition_log.log_start_offset
    end = partition_log.high_watermark
    while offset < end:
        region = partition_log.read(offset, READ_CHUNK_BYTES, max_offset=end).region
        if region is None:
            return
        data = region.read_bytes()
        advanced = offset
        for pos, header in iter_batches(data):
            advanced = header.next_offset
            yield data, pos, header, offset
        if advanced <= offset:
            return
        offset = advanced
