"""A clean job as the broker hands it to the cleaner's worker process: everything the clean needs to know
about one log, taken on the broker side in one go, so the worker never asks the live log anything.

The worker reads the inactive segments named here (each up to the size it had when the job was made:
inactive segments never grow) and writes only `.cleaned` files; the aborted transactions and the
producers' last batches come from the broker's own state (the `.txnindex` of the active segment and the
producer state change under the event loop, so the worker must not read them itself). The job is
plain data: it crosses the pipe pickled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pybroker.storage.cleaner.cleaner import last_batch_of_producers
from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig
from pybroker.storage.segment import Segment
from pybroker.storage.transaction_index import AbortedTxn


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One inactive segment as it was when the job was made."""

    base_offset: int
    next_offset: int
    size: int
    index_entries: int
    timeindex_entries: int
    #: where the batch holding the first dirty offset starts, for the one segment that holds it
    start_position: int | None = None


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """The cleaner settings a worker needs (`log.cleaner.*`)."""

    dedupe_buffer_size: int
    load_factor: float
    io_max_bytes_per_second: float
    read_chunk: int


@dataclass(frozen=True, slots=True)
class CleanJob:
    """One clean of one log from `first_dirty` towards `first_uncleanable`."""

    directory: Path
    topic: str
    partition: int
    config: LogConfig
    segments: tuple[SegmentInfo, ...]
    first_dirty: int
    first_uncleanable: int
    now_ms: int
    #: the aborted transactions of the log from the first segment's base offset on (from the `.txnindex`es)
    aborted: tuple[AbortedTxn, ...]
    #: producer id -> (last offset of its last data batch or -1, its epoch): Kafka's `lastRecordsOfActiveProducers`
    producers: dict[int, tuple[int, int]]


def _info(segment: Segment, first_dirty: int) -> SegmentInfo:
    start = None
    if segment.base_offset < first_dirty < segment.next_offset:
        found = segment.find(first_dirty)
        start = found[0] if found is not None else 0
    return SegmentInfo(segment.base_offset, segment.next_offset, segment.size, len(segment.index),
                       len(segment.timeindex), start)


def make_job(log: Log, segments: list[Segment], first_dirty: int, first_uncleanable: int, now_ms: int) -> CleanJob:
    """The job for a clean of `segments` (from `cleanable_segments`) of `log`."""
    upper = max((s.next_offset for s in segments), default=first_dirty)
    aborted = log.aborted_txns(segments[0].base_offset, upper) if segments else []
    return CleanJob(log.dir, log.topic, log.partition, log.config,
                    tuple(_info(s, first_dirty) for s in segments), first_dirty, first_uncleanable, now_ms,
                    tuple(aborted), last_batch_of_producers(log))
