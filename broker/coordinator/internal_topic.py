"""An internal compacted topic a coordinator keeps its state in: created on first use, written durably, read back.

`__consumer_offsets` (groups) and `__transaction_state` (transactions) are both compacted topics the broker
makes on first use, with Kafka's settings and the partition count of a broker config; both are written one
batch at a time, each answered only once the flusher has fsynced it (the same delayed append as an acks=all
produce, so no answer ever depends on a state a crash could lose); and both are read back whole at startup
to rebuild the coordinator's state. The coordinators differ in the records they keep, not in this.

Threads: `ensure` blocks (creating 50 partitions touches many files): the transaction coordinator runs it
in a thread, the group coordinator on the loop as it always has. `write_batch` runs on the event loop's thread
and calls `done` there. `batches_of` blocks: replay runs it in a thread (`runtime.CoordinatorRuntime`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.partitions.partition import ACKS_ALL, AppendOutcome
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import BatchHeader, iter_batches, parse_header
from pybroker.storage.errors import TopicExistsError

if TYPE_CHECKING:
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
    from pybroker.storage.log import Log

log = get_logger("pybroker.coordinator")

#: a replay reads this much of a partition at a time
READ_CHUNK_BYTES = 1 << 20
#: what `InternalTopic.write_batch` returns when nothing was written (`done` then reports why)
NOT_WRITTEN = -1

#: (the code once the batch is durable or failed, whether the partition was found to append to)
WriteDone = Callable[[ErrorCode, bool], None]


class InternalTopic:
    """An internal compacted topic, created the first time it is needed (`ensure`, blocking)."""

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

    async def ensure_off_loop(self) -> None:
        """`ensure` on a worker thread, run to its end even when the request that needed the topic is
        cancelled meanwhile (`broker/detached_work.py`): the broker's stop waits for it."""
        await self.partitions.detached.run(self.ensure)

    def ensure(self) -> None:
        if self.exists():
            return
        try:
            self.partitions.create_topic(self.name, self.num_partitions, dict(self._configs))
        except TopicExistsError:
            return
        log.info("created internal topic", topic=self.name, partitions=self.num_partitions)

    def write_batch(self, partition: int, build: Callable[[Log], bytes | bytearray], now_ms: int, done: WriteDone) -> int:
        """Append the batch `build(the partition's log)` makes and call `done` once it is fsynced, or failed;
        `done` is never called before this returns. Returns the offset the batch's first record got, or
        `NOT_WRITTEN` when there was no partition or the partition layer refused it at once."""
        loop = asyncio.get_running_loop()
        target, code = self.partitions.resolve(self.name, partition)
        if target is None:
            loop.call_soon(done, code, False)
            return NOT_WRITTEN
        batch = bytearray(build(target.log))
        # the partition layer appends, wakes fetches of the partition and completes once it is fsynced
        appending = target.append(batch, [(0, parse_header(batch, 0))], acks=ACKS_ALL, now_ms=now_ms)
        outcome = appending.outcome
        if appending.done and outcome.error is not ErrorCode.NONE:  # refused (a fenced producer): nothing written
            log.info("internal topic append refused", topic=self.name, partition=partition, error=outcome.message)
            loop.call_soon(done, outcome.error, True)
            return NOT_WRITTEN
        if appending.done:
            loop.call_soon(done, self._durable_code(outcome, partition), True)
        else:
            appending.on_done(lambda op: done(self._durable_code(op.value, partition), True))
        return outcome.base_offset

    def _durable_code(self, outcome: AppendOutcome, partition: int) -> ErrorCode:
        if outcome.error is not ErrorCode.NONE:
            log.error("internal topic write failed", topic=self.name, partition=partition, error=outcome.message)
        return outcome.error


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
