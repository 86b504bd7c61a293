"""Finding records by time in a log's segments: ListOffsets by timestamp, and its -3 (max timestamp).

Both walk the segments' in-memory summaries (each segment's largest timestamp) and touch a file only in
the one segment that can hold the answer, so a lookup over many segments reads one time index.
"""

from __future__ import annotations

from collections.abc import Sequence

from pybroker.storage.segment import Segment


def offset_for_timestamp(segments: Sequence[Segment], log_start: int, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or above `log_start` whose timestamp is at or after
    `timestamp`; None when there is none."""
    for segment in segments:
        if segment.next_offset <= log_start or segment.max_timestamp < timestamp:
            continue
        found = segment.find_by_timestamp(timestamp, log_start)
        if found is not None:
            return found
    return None


def max_timestamp_and_offset(segments: Sequence[Segment], log_start: int) -> tuple[int, int]:
    """(largest timestamp, offset of its first record) at or above `log_start`; (-1, -1) when empty."""
    best: Segment | None = None
    for segment in segments:
        if segment.next_offset > log_start and segment.size and (
                best is None or segment.max_timestamp > best.max_timestamp):
            best = segment
    if best is None or best.max_timestamp < 0:
        return -1, -1
    return best.offset_of_max_timestamp()
