"""One partition's record set from a Fetch answer, walked batch by batch into a `ColumnBuilder`.

Sans-I/O (bytes in, columns and a next position out), so the rules can be tested without a broker.
They are a Kafka consumer's (Kafka's `CompletedFetch`), without an object per record:
- batches that end before the position are skipped (a fetch may start with the batch holding it, and
  records before the range's start are dropped by the builder, as are those at or past its end);
- the position moves past every batch looked at, records kept or not: compaction holes, control
  batches and aborted transactions all take offsets no row shows, so the reader never counts rows;
- read_committed: the answer's aborted transactions (producer id, first offset) mark, in offset
  order, which producers' transactional batches are dropped, until that producer's ABORT marker;
  control batches (the markers) are never rows;
- the CRC-32C of each batch is checked (`kafka.check.crcs`, true by default);
- compressed batches are decompressed with pybroker's own codecs, under the same size cap;
- an incomplete batch at the end is the fetch's size limit cutting it, not an error: the next fetch
  starts there. Anything else that is not a well-formed v2 batch raises `CorruptRecords` naming the
  partition and offset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from pybroker.protocol.records.batch import (
    HEADER_SIZE,
    MAGIC_V2,
    BatchHeader,
    Buffer,
    RecordsError,
    crc_ok,
    iter_batches,
)
from pybroker.protocol.records.codecs import NONE, decompress
from pybroker.protocol.records.control import ABORT, control_type
from pybroker.protocol.records.record import MAX_DECOMPRESSED, decode_records


class CorruptRecords(RuntimeError):
    """A fetched batch is not what Kafka's format says it must be (named by partition and offset)."""


class Builder(Protocol):
    def add_batch(self, data: Any, start: int, end: int, records_count: int, base_offset: int,
                  last_offset_delta: int, base_timestamp: int, max_timestamp: int, timestamp_type: int,
                  low: int, high: int) -> int: ...


@dataclass
class Walked:
    """What one record set gave: the next offset to fetch, rows added, whole batches seen."""

    position: int
    rows: int = 0
    batches: int = 0


def _aborted_queue(aborted: Iterable[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """(first offset, producer id), latest first, so `pop()` takes the earliest."""
    return sorted(((first, pid) for pid, first in aborted or ()), reverse=True)


def _is_abort_marker(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    records = decode_records(buf, pos, header)
    return bool(records) and control_type(records[0]) == ABORT


def walk(buf: Buffer, builder: Builder, *, name: str, position: int, end: int, read_committed: bool,
         aborted: Iterable[tuple[int, int]] | None = None, check_crcs: bool = True,
         max_decompressed: int = MAX_DECOMPRESSED) -> Walked:
    """Add the rows of `buf` (one partition's records in a Fetch answer) at offsets [position, end) to
    `builder`; `aborted` is the answer's (producer id, first offset) list, used under read_committed."""
    result = Walked(position)
    pending = _aborted_queue(aborted) if read_committed else []
    aborting: set[int] = set()
    for pos, header in iter_batches(buf):
        result.batches += 1
        next_offset = header.base_offset + header.last_offset_delta + 1
        if next_offset <= result.position:
            continue
        where = f"{name} batch at offset {header.base_offset}"
        if result.position >= end:
            break
        if header.magic != MAGIC_V2:
            raise CorruptRecords(f"{where}: record format v{header.magic} (message sets before Kafka 0.11) is "
                                 "not supported by the pybroker reader")
        if check_crcs and not crc_ok(buf, pos, header):
            raise CorruptRecords(f"{where}: CRC-32C mismatch (the record batch is corrupt)")
        try:
            if not _keep(buf, pos, header, pending, aborting):
                result.position = next_offset
                continue
            if header.compression == NONE:
                data, start, stop = buf, pos + HEADER_SIZE, pos + header.size
            else:
                with memoryview(buf) as view:
                    data = decompress(header.compression, view[pos + HEADER_SIZE : pos + header.size],
                                      max_decompressed)
                start, stop = 0, len(data)
            result.rows += builder.add_batch(
                data, start, stop, header.records_count, header.base_offset, header.last_offset_delta,
                header.base_timestamp, header.max_timestamp, header.timestamp_type, result.position, end)
        except (RecordsError, ValueError) as exc:
            raise CorruptRecords(f"{where}: {getattr(exc, 'message', exc)}") from None
        result.position = next_offset
    return result


def _keep(buf: Buffer, pos: int, header: BatchHeader, pending: list[tuple[int, int]], aborting: set[int]) -> bool:
    """Kafka's consumer under read_committed (everything passes under read_uncommitted but control batches)."""
    if header.has_producer_id:
        last_offset = header.base_offset + header.last_offset_delta
        while pending and pending[-1][0] <= last_offset:
            aborting.add(pending.pop()[1])
        if header.is_control:
            if header.producer_id in aborting and _is_abort_marker(buf, pos, header):
                aborting.discard(header.producer_id)
            return False
        if header.is_transactional and header.producer_id in aborting:
            return False
    return not header.is_control
