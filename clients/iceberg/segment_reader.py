"""One partition's records read straight from its segment files, as a Fetch would answer them.

Why files and not Fetch: the Iceberg worker is a process beside the broker on the same disk; reading the
partition dir needs no listener, no credentials and no request slots, and the bytes are the ones a
Fetch would send. What a Fetch adds (where reading may stop, which transactions aborted) is taken from
the same places the broker takes it:
- where to stop: the broker tells the worker each partition's last stable offset, never above what is
  fsynced (`broker/iceberg_tables.py`), so everything below it is whole on disk and committed or aborted;
- the position of an offset: the segment whose base offset is the largest at or below it, then the
  segment's sparse offset index (`.index`; the active segment's entries reach the file in bunches, so it
  may lag), then a walk of the batch headers after it (`_skip_before`), read `SEEK_BYTES` at a time;
- aborted transactions: the `.txnindex` entries of the segment read and every later one below the end
  (an entry sits in the segment of its ABORT marker), those whose last offset is at or past the position
  (Kafka's `collectAbortedTransactions`).

A segment removed meanwhile (retention, a compaction's swap) is read again from the new list on the next
call; a position below the log's first offset moves up to it, and the skip is reported.

Any thread or process may call it; it reads files only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pybroker.protocol.records.batch import iter_batches
from pybroker.storage.offline import OFFSET_ENTRY, TXN_INDEX_ENTRY, TXN_INDEX_ENTRY_SIZE

SEGMENT = re.compile(r"^(\d{20})\.log$")
#: how many bytes one read takes from a segment at most (a batch larger than this is read whole anyway)
READ_BYTES = 8 * 1024 * 1024
#: how many bytes of a segment one step of the header walk reads
SEEK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Chunk:
    """Whole batches from `start` on (maybe beginning before it), and the aborted transactions they need."""

    data: bytes
    start: int
    aborted: list[tuple[int, int]]  # (producer id, first offset), as a Fetch answer lists them
    segment_end: int | None  # the next segment's base offset when this read reached the segment's end
    skipped_to: int | None = None  # the position moved up to the log's first offset (data removed)


def segment_bases(partition_dir: Path) -> list[int]:
    """The base offsets of the partition's segments, in order."""
    bases = []
    for name in os.listdir(partition_dir):
        match = SEGMENT.match(name)
        if match:
            bases.append(int(match.group(1)))
    return sorted(bases)


def _path(partition_dir: Path, base: int, suffix: str) -> Path:
    return partition_dir / f"{base:020d}{suffix}"


def index_position(partition_dir: Path, base: int, offset: int) -> int:
    """The file position of the last indexed batch at or before `offset` in segment `base` (0 without one)."""
    try:
        data = _path(partition_dir, base, ".index").read_bytes()
    except FileNotFoundError:
        return 0
    target = offset - base
    found = 0
    previous = -1
    whole = len(data) - len(data) % OFFSET_ENTRY.size
    for relative, position in OFFSET_ENTRY.iter_unpack(data[:whole]):
        if relative <= previous or relative > target:  # a preallocated tail of zeros, or past the target
            break
        found, previous = position, relative
    return found


def aborted_after(partition_dir: Path, bases: list[int], start: int, end: int) -> list[tuple[int, int]]:
    """(producer id, first offset) of the transactions aborted in [start, end), from the `.txnindex` files."""
    aborted = []
    for base in bases:
        if base >= end:
            break
        try:
            data = _path(partition_dir, base, ".txnindex").read_bytes()
        except FileNotFoundError:
            continue
        whole = len(data) - len(data) % TXN_INDEX_ENTRY_SIZE
        for _version, producer_id, first, last, _lso in TXN_INDEX_ENTRY.iter_unpack(data[:whole]):
            if last >= start and first < end:
                aborted.append((producer_id, first))
    return aborted


def _skip_before(fd: int, position: int, size: int, start: int) -> int:
    """From `position` (a batch boundary), the position of the first batch that does not end before `start`."""
    while position < size:
        data = os.pread(fd, min(SEEK_BYTES, size - position), position)
        passed = 0
        for at, header in iter_batches(data):
            if header.base_offset + header.last_offset_delta >= start:
                return position + at
            passed = at + header.size
        if not passed:  # a batch larger than a step (or the incomplete tail): the read starts there
            return position
        position += passed
    return position


def read_chunk(partition_dir: Path, start: int, end: int, max_bytes: int = READ_BYTES) -> Chunk | None:
    """Batches of the partition holding offsets from `start` on (below `end`); None when there are none."""
    bases = segment_bases(partition_dir)
    if not bases or start >= end:
        return None
    skipped_to = None
    if start < bases[0]:
        skipped_to = start = bases[0]
    index = max(i for i, base in enumerate(bases) if base <= start)
    base = bases[index]
    following = bases[index + 1] if index + 1 < len(bases) else None
    position = index_position(partition_dir, base, start)
    try:
        with open(_path(partition_dir, base, ".log"), "rb") as file:
            size = os.fstat(file.fileno()).st_size
            position = _skip_before(file.fileno(), position, size, start)
            data = os.pread(file.fileno(), min(max_bytes, max(size - position, 0)), position)
            reached_end = position + len(data) >= size
    except FileNotFoundError:
        return None  # removed since it was listed: the next call lists again
    return Chunk(data, start, aborted_after(partition_dir, bases[index:], start, end),
                 following if reached_end else None, skipped_to)
