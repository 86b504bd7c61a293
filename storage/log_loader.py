"""Opening a partition's segments at startup (Kafka's `LogLoader`).

After a clean shutdown nothing is re-read: segments open lazily and the last one learns its end from
its index and a short scan. After a crash, every segment that holds data at or above the recovery point
(everything below it was fsynced) is re-validated batch by batch with CRCs and the record walk of the
produce path (a batch whose records do not match its header is as invalid as a torn one), its indexes rebuilt, and
the log cut at the first invalid batch; segments after a cut are deleted, since nothing after a torn
write can be trusted to follow it. Leftover temporary files of interrupted operations are removed, and
a cleaner's segment swap that a crash interrupted is finished or undone first (`cleaner.swap`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import structlog

from pybroker.storage.cleaner.swap import complete_interrupted_swaps
from pybroker.storage.log_config import LogConfig
from pybroker.storage.segment import Segment
from pybroker.storage.segment_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    base_offsets,
    segment_path,
)
from pybroker.storage.transaction_index import TXN_INDEX_SUFFIX

log = structlog.get_logger("pybroker.storage.log_loader")

#: files of interrupted writes and deletions (Kafka's `.deleted` and `.cleaned`, our `.tmp`)
LEFTOVER_SUFFIXES = (".tmp", ".deleted", ".cleaned")


@dataclass(slots=True)
class LoadStats:
    segments_recovered: int = 0
    bytes_truncated: int = 0
    #: stored batches whose records do not match their header (found, reported, kept)
    malformed_batches: int = 0


@dataclass(slots=True)
class LoadedSegments:
    segments: list[Segment]
    log_start_offset: int
    recovery_point: int
    stats: LoadStats = field(default_factory=LoadStats)


def _remove_leftovers(directory: Path, names: list[str], bases: set[int]) -> None:
    for name in names:
        if name.endswith(LEFTOVER_SUFFIXES):
            (directory / name).unlink(missing_ok=True)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):  # an index without its log is an orphan
        for base in set(base_offsets(names, suffix)) - bases:
            segment_path(directory, base, suffix).unlink(missing_ok=True)


def load_segments(directory: Path, config: LogConfig, *, clean: bool, recovery_point: int,
                  log_start_offset: int, now_ms: int, new_segment: Callable[[int], Segment]) -> LoadedSegments:
    """Open (and, after a crash, recover) the segments in `directory`; `new_segment(base)` makes an
    empty active segment when there is none."""
    names = os.listdir(directory)
    if complete_interrupted_swaps(directory, names):  # a cleaner's segment swap that a crash interrupted
        names = os.listdir(directory)
    bases = set(base_offsets(names, LOG_SUFFIX))
    _remove_leftovers(directory, names, bases)
    stats = LoadStats()
    segments = [Segment.open_existing(directory, base, now_ms=now_ms, max_index_bytes=config.max_index_bytes,
                                      index_interval_bytes=config.index_interval_bytes) for base in sorted(bases)]
    for segment, following in pairwise(segments):
        segment.upper_bound = segment.next_offset = following.base_offset
    try:
        if not clean:
            _recover(segments, recovery_point, stats)
        if segments:
            segments[-1].make_active(config.max_index_bytes)
    except BaseException:
        for segment in segments:  # a failing disk: leave no file open behind
            segment.release()
        raise
    log_start = max(log_start_offset, segments[0].base_offset if segments else log_start_offset, 0)
    if not segments or log_start > segments[-1].next_offset:
        for segment in segments:  # the log starts beyond all it holds: start afresh there
            stats.bytes_truncated += segment.size
            segment.delete_files()
        segments = [new_segment(log_start)]
    log_end = segments[-1].next_offset
    return LoadedSegments(segments, log_start, log_end if clean else min(recovery_point, log_end), stats)


def _malformed(segment: Segment, stats: LoadStats, base_offset: int, problem: str) -> None:
    stats.malformed_batches += 1
    log.warning("stored batch has malformed records", segment=str(segment.log_path), base_offset=base_offset,
                problem=problem, action="kept: its CRC shows it was written whole; `pybroker check-log` lists "
                                        "it, and DeleteRecords past it removes it")


def _recover(segments: list[Segment], recovery_point: int, stats: LoadStats) -> None:
    """Re-validate the segments holding data at or above the recovery point; cut at the first bad batch."""
    for i, segment in enumerate(segments):
        if segment.upper_bound is not None and segment.upper_bound <= recovery_point:
            continue  # wholly below the recovery point: fsynced, trusted
        stats.segments_recovered += 1
        cut = segment.recover(check_crc=True, on_malformed=functools.partial(_malformed, segment, stats))
        stats.bytes_truncated += cut
        if cut:
            for later in segments[i + 1 :]:
                stats.bytes_truncated += later.size
                later.delete_files()
            del segments[i + 1 :]
            segment.upper_bound = None
            return
