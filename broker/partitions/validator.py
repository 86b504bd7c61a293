"""A client's batch judged and stamped for its partition: Kafka's `LogValidator`, as the partition layer calls it.

The checks themselves are protocol's (`protocol.records.validate`: the header checks, then the compiled
record walk); this module applies them with the partition's settings (max.message.bytes, compaction, the
timestamp rules) and then does what Kafka's `setMaxTimestamp` does to the batch: the log append time on a
LogAppendTime topic, else the largest record timestamp, patched into the header in place (and the CRC
recomputed) only where the batch says otherwise. The stamped header is built from the parsed one, so the
batch's header is parsed once on its way from the request to the segment file.

Threads: `check_header`, `walk` of an uncompressed batch and `stamp` run on the event loop. A compressed
batch's walk (decompression under a cap, then the walk), a `RecordWalk` from `walker`, is taken off the loop, since a
small payload can take long to inflate: `in_thread` runs in `VALIDATION_POOL` under the small cap
`validation_processes.THREAD_BUDGET` (every ordinary batch ends there), and a payload that inflates past
it is walked again under the real cap by `in_process` (awaited on the loop) in a worker process, where
neither the inflating nor the walk holds the broker's interpreter lock. Both read the request's buffer
and write nothing.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pybroker.broker.partitions import validation_processes
from pybroker.protocol.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchHeader,
    Buffer,
    RecordsError,
    WritableBuffer,
    restamp,
)
from pybroker.protocol.records.codecs import passed_cap
from pybroker.protocol.records.record import MAX_DECOMPRESSED
from pybroker.protocol.records.records_check import prefix_refusal
from pybroker.protocol.records.validate import (
    TimestampRule,
    ValidatedRecords,
    check_produce_batch,
    check_produce_records,
)
from pybroker.storage.log_config import LogConfig

LOG_APPEND_TIME_TYPE = "LogAppendTime"
NO_APPEND_TIME = -1

#: decompression and walks of compressed batches; bounded, and apart from the loop's default executor
VALIDATION_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                     thread_name_prefix="pybroker-validate")


def check_header(records: Buffer, config: LogConfig, *, allow_zstd: bool) -> BatchHeader:
    """The header-level checks (request shape, size, CRC, codec, Kafka's batch rules): the one parse of
    the header. Raises `RecordsError` with the partition's answer."""
    return check_produce_batch(records, max_batch_bytes=config.max_message_bytes, allow_zstd=allow_zstd)


def timestamp_rule(config: LogConfig, now_ms: int) -> TimestampRule:
    return TimestampRule(now_ms=now_ms, before_max_ms=config.message_timestamp_before_max_ms,
                         after_max_ms=config.message_timestamp_after_max_ms,
                         log_append_time=config.message_timestamp_type == LOG_APPEND_TIME_TYPE)


def walk(records: Buffer, header: BatchHeader, config: LogConfig, now_ms: int,
         key: tuple[str, int]) -> ValidatedRecords:
    """Every record of the batch walked against the partition's rules (on the loop: uncompressed only)."""
    return walker(records, header, config, now_ms, key)()


def walker(records: Buffer, header: BatchHeader, config: LogConfig, now_ms: int, key: tuple[str, int]) -> RecordWalk:
    """`walk` as an object, to run off the loop for a compressed batch (the settings are read now, on the
    loop): the one place a partition's record rules are built."""
    return RecordWalk(records, header, "compact" in config.cleanup_policy, timestamp_rule(config, now_ms),
                      f"{key[0]}-{key[1]}")


@dataclass(frozen=True, slots=True)
class RecordWalk:
    """The walk of one batch with its partition's rules: called whole (`__call__`: on the loop for an
    uncompressed batch), or for a compressed one `in_thread` and, for a payload too big for a thread,
    `in_process`."""

    records: Buffer
    header: BatchHeader
    require_keys: bool
    timestamps: TimestampRule
    partition_name: str

    def __call__(self) -> ValidatedRecords:
        return check_produce_records(self.records, self.header, require_keys=self.require_keys,
                                     timestamps=self.timestamps, partition_name=self.partition_name)

    def in_thread(self) -> ValidatedRecords | None:
        """In `VALIDATION_POOL`: the walk under `THREAD_BUDGET`. A payload that inflates past it is refused
        when its first `PREFIX_BYTES` already say so (`prefix_refusal`, as Kafka reads records: a bomb's
        first record), else None: `in_process` judges it whole. RecordsError with the refusal."""
        try:
            return check_produce_records(self.records, self.header, require_keys=self.require_keys,
                                         max_decompressed=validation_processes.THREAD_BUDGET,
                                         timestamps=self.timestamps, partition_name=self.partition_name)
        except RecordsError as exc:
            if not passed_cap(exc, validation_processes.THREAD_BUDGET):
                raise
        refusal = prefix_refusal(self.records, 0, self.header, validation_processes.PREFIX_BYTES)
        if refusal is not None:
            raise refusal
        return None

    async def in_process(self) -> ValidatedRecords:
        """On the loop: the walk under the real cap (`MAX_DECOMPRESSED`) in a worker process."""
        return await validation_processes.check(self.records, self.header, require_keys=self.require_keys,
                                                timestamps=self.timestamps, partition_name=self.partition_name,
                                                max_decompressed=MAX_DECOMPRESSED)


def stamp(validated: ValidatedRecords, config: LogConfig, now_ms: int) -> WritableBuffer:
    """Kafka's `setMaxTimestamp` on the validated batch, on the loop just before its append: the log append
    time (`validated.log_append_time`) on LogAppendTime topics, else the largest record timestamp (and
    CreateTime). A batch that already says so is left alone; otherwise it is patched in place and its
    header replaced, not parsed again. Returns the buffer to append, writable (the log patches offsets
    in it): the request's own, or a copy when that one is read-only."""
    records = validated.records
    if not isinstance(records, bytearray) and (isinstance(records, bytes) or records.readonly):
        records = validated.records = bytearray(records)
    pos, header = validated.batches[0]
    if config.message_timestamp_type == LOG_APPEND_TIME_TYPE:
        validated.log_append_time = now_ms
        timestamp_type, max_timestamp = LOG_APPEND_TIME, now_ms
    else:
        validated.log_append_time = NO_APPEND_TIME
        timestamp_type, max_timestamp = CREATE_TIME, validated.max_timestamp
    if header.timestamp_type != timestamp_type or header.max_timestamp != max_timestamp:
        validated.batches = [(pos, restamp(records, pos, header, timestamp_type, max_timestamp))]
    return records
