"""A Spark task's read: exactly the records of one offset range, from its own client.

Why position-driven: a range [start, end) has `end - start` offsets but may hold fewer records (compaction
removes records and leaves holes; transaction markers take offsets that kafka-python never returns). So
the loop never counts records; it polls until the consumer's *position* (the next offset it will fetch,
which kafka-python moves past holes and control batches) reaches `end`, keeping only records below `end`.

Transactions: with `kafka.isolation.level=read_committed` (the default, as Spark's source) kafka-python's
Fetch asks for isolation level 1, so the broker answers up to the last stable offset with the list of
aborted transactions, and the client drops those transactions' batches and every control batch (commit
and abort markers) while its position moves past them. The planner's latest offsets are read_committed too
(ListOffsets answers the last stable offset), so a range never ends inside a transaction still open.

What stops it otherwise:
- the start is below the log start (retention/DeleteRecords removed it): the fetch answers
  OFFSET_OUT_OF_RANGE, and `failOnDataLoss` decides between an error and skipping to the log start;
- the partition ends below `end` (the topic was deleted and created again): the same choice;
- no progress for `kafkaConsumer.pollTimeoutMs`: a TimeoutError naming the partition and offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from kafka import TopicPartition as KafkaTopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import OffsetOutOfRangeError

from pybroker.clients.spark.data_loss import report_data_loss
from pybroker.clients.spark.offset_reader import new_consumer
from pybroker.clients.spark.planning import OffsetRange

POLL_MS = 500
MAX_RECORDS_PER_POLL = 2000


def read_range(rng: OffsetRange, bootstrap_servers: tuple[str, ...], config: Mapping[str, Any], *,
               fail_on_data_loss: bool, poll_timeout_ms: int) -> Iterator[list[ConsumerRecord]]:
    """Yield the records of `rng` in offset order, in lists of at most one poll's worth."""
    if rng.size == 0:
        return
    tp = KafkaTopicPartition(rng.topic, rng.partition)
    name = f"{rng.topic}-{rng.partition}"
    consumer = new_consumer(bootstrap_servers, {"max_poll_records": MAX_RECORDS_PER_POLL, **config})
    try:
        consumer.assign([tp])
        consumer.seek(tp, rng.start)
        position = rng.start
        stalled_since = time.monotonic()
        while position < rng.end:
            try:
                polled = consumer.poll(timeout_ms=POLL_MS).get(tp, [])
            except OffsetOutOfRangeError:
                earliest = consumer.beginning_offsets([tp])[tp]
                latest = consumer.end_offsets([tp])[tp]
                if position < earliest:
                    report_data_loss(f"offsets {position} to {min(earliest, rng.end)} of {name} are no longer "
                                     f"in the topic (its log now starts at {earliest})", fail=fail_on_data_loss)
                    position = earliest
                elif position > latest:
                    report_data_loss(f"{name} now ends at offset {latest}, before offset {position} this task "
                                     f"must read up to {rng.end}", fail=fail_on_data_loss)
                    return
                else:
                    raise
                if position >= rng.end:
                    return
                consumer.seek(tp, position)
                continue
            wanted = [r for r in polled if r.offset < rng.end]
            if wanted:
                yield wanted
            moved = consumer.position(tp)
            if moved is not None and moved > position:
                position, stalled_since = moved, time.monotonic()
                continue
            if not polled:
                latest = consumer.end_offsets([tp])[tp]
                if latest <= position:
                    report_data_loss(f"{name} ends at offset {latest}, but this task must read offsets "
                                     f"{position} to {rng.end}", fail=fail_on_data_loss)
                    return
            if (time.monotonic() - stalled_since) * 1000 > poll_timeout_ms:
                raise TimeoutError(f"reading {name}: no progress past offset {position} (of {rng.start} to "
                                   f"{rng.end}) for {poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")
    finally:
        consumer.close()
