"""What a ShareFetch does to one share-partition: read whole batches from the first record it may hand
out, and acquire, for the member, the records the read covers (KIP-932).

The read starts at the share-partition's first acquirable offset (a record made available again, or the
first never handed out) and stops at the high watermark, or at the last stable offset for a group whose
`share.isolation.level` is read_committed. Only records the read holds are acquired (`up_to`), so every
acquired record is in the answer. In the default batch-optimized mode the batch holding the last record
acquired is acquired whole (`max_records` is a soft limit, as in Kafka); in record-limit mode (ShareFetch
v2's acquire mode 1) never more than `max_records`. Under read_committed the records of aborted transactions in the read
are archived at once, never delivered, as Kafka's share-partition does: they are found by walking the
batch headers against the aborted transactions the log lists for the range (a producer's batches from
its aborted transaction's first offset until its next control batch).

A read is capped at `PARTITION_READ_BYTES` per partition, whatever the request allows, because its bytes
are read into memory to find the batch boundaries (a record larger than that still comes: the first batch
always does). The answer carries only the batches from the first to the last acquired record (as Kafka
4.4 slices its fetched records): a member asking for 100 records of a long backlog is sent those batches,
not the whole read (`bench/share.py` measured 8 MiB sent per 100-record fetch before).

Threads: the event loop only.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pybroker.broker.share.share_partition import AckType, Acquired, SharePartition
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import LOG_OVERHEAD, BatchHeader, iter_batches
from pybroker.storage.errors import LogClosedError, OffsetOutOfRange

if TYPE_CHECKING:
    from pybroker.broker.share.service import ShareService

PARTITION_READ_BYTES = 1 << 20


@dataclass(slots=True)
class ShareRead:
    error: ErrorCode = ErrorCode.NONE
    records: bytes = b""
    acquired: list[Acquired] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(a.last_offset - a.first_offset + 1 for a in self.acquired)


def acquire_records(shares: ShareService, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                    max_records: int, max_bytes: int, now_ms: int, record_limit: bool = False) -> ShareRead:
    info = shares.logs.topic_by_id(topic_id)
    if info is None:
        return ShareRead(ErrorCode.UNKNOWN_TOPIC_ID)
    target, code = shares.replicas.resolve(info.name, partition)
    if target is None:
        return ShareRead(code)
    _, high_watermark, last_stable, log_start = target.positions()
    read_committed = shares.group_config(group_id, "share.isolation.level") == "read_committed"
    end = last_stable if read_committed else high_watermark
    share = shares.share_partition((group_id, topic_id, partition), log_start, high_watermark,
                                   target.log.offset_for_timestamp)
    first = share.acquirable(end)
    if first is None or max_records <= 0:
        return ShareRead()
    try:
        result, aborted = target.read(first, max(1, min(max_bytes, PARTITION_READ_BYTES)),
                                      read_committed=read_committed, min_one_batch=True)
    except OffsetOutOfRange:
        share.log_start_moved(target.positions()[3])
        return ShareRead()
    except LogClosedError:
        return ShareRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    except OSError:
        return ShareRead(ErrorCode.KAFKA_STORAGE_ERROR)
    if result.region is None or not len(result.region):
        return ShareRead()
    data = result.region.read_bytes()
    batches = list(iter_batches(data))
    headers = [header for _, header in batches]
    if not headers:
        return ShareRead()
    acquired = share.acquire(member_id, end, max_records, now_ms, up_to=headers[-1].last_offset)
    if acquired and not record_limit:
        acquired = _whole_batch(share, member_id, end, headers, acquired, now_ms)
    if read_committed and aborted:
        acquired = _archive_aborted(share, member_id, acquired, _aborted_ranges(headers, aborted), now_ms)
    return ShareRead(ErrorCode.NONE, _slice(data, batches, acquired), acquired)


def _slice(data: bytes, batches: list[tuple[int, BatchHeader]], acquired: list[Acquired]) -> bytes:
    """The read's batches from the one holding the first acquired record to the one holding the last."""
    if not acquired:
        return b""
    low, high = acquired[0].first_offset, max(run.last_offset for run in acquired)
    start = next((pos for pos, header in batches if header.last_offset >= low), 0)
    end = start
    for pos, header in batches:
        if header.base_offset > high:
            break
        end = pos + header.batch_length + LOG_OVERHEAD
    return data[start:end]


def _whole_batch(share: SharePartition, member_id: str, end: int, headers: list[BatchHeader],
                 acquired: list[Acquired], now_ms: int) -> list[Acquired]:
    """Batch-optimized acquisition (ShareFetch's default mode): the rest of the batch holding the last record
    acquired is acquired too, so a client gets whole batches (`max_records` is then a soft limit)."""
    last = acquired[-1].last_offset
    batch_end = next((h.last_offset for h in headers if h.base_offset <= last <= h.last_offset), last)
    if batch_end <= last:
        return acquired
    runs = list(acquired)
    for run in share.acquire(member_id, end, batch_end - last, now_ms, up_to=batch_end):
        tail = runs[-1]
        if tail.last_offset + 1 == run.first_offset and tail.delivery_count == run.delivery_count:
            runs[-1] = Acquired(tail.first_offset, run.last_offset, run.delivery_count)
        else:
            runs.append(run)
    return runs


def _aborted_ranges(headers: list[BatchHeader], aborted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The offset ranges of the read's batches that belong to aborted transactions."""
    starts: dict[int, list[int]] = {}
    for producer_id, first in aborted:
        starts.setdefault(producer_id, []).append(first)
    for firsts in starts.values():
        firsts.sort()
    open_: set[int] = set()
    ranges: list[tuple[int, int]] = []
    for header in headers:
        pid = header.producer_id
        if pid in starts and starts[pid] and header.base_offset >= starts[pid][0]:
            starts[pid].pop(0)
            open_.add(pid)
        if pid in open_:
            if header.is_control:
                open_.discard(pid)
            elif header.is_transactional:
                ranges.append((header.base_offset, header.last_offset))
    return ranges


def _archive_aborted(share: SharePartition, member_id: str, acquired: list[Acquired],
                     ranges: list[tuple[int, int]], now_ms: int) -> list[Acquired]:
    """Archive the acquired records of aborted transactions; returns the acquired runs left."""
    kept: list[Acquired] = []
    for run in acquired:
        offset = run.first_offset
        while offset <= run.last_offset:
            hit = next(((lo, hi) for lo, hi in ranges if lo <= offset <= hi), None)
            if hit is not None:
                last = min(hit[1], run.last_offset)
                share.acknowledge(member_id, offset, last, [int(AckType.REJECT)], now_ms)
                offset = last + 1
                continue
            nxt = min((lo for lo, _ in ranges if lo > offset), default=run.last_offset + 1)
            last = min(nxt - 1, run.last_offset)
            kept.append(Acquired(offset, last, run.delivery_count))
            offset = last + 1
    return kept
