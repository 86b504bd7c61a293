"""Which segments are recopied into one replacement segment (Kafka's `groupSegmentsBySize`).

Cleaning shrinks segments; recopying each into its own replacement would leave ever more, ever
smaller files. Consecutive segments are therefore merged while the group's log bytes stay within
`segment.bytes`, its index bytes within `segment.index.bytes`, and its offsets within the int32 range
that relative index offsets allow. A segment never ends up in two groups, and order is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pybroker.storage.offset_index import INT32_MAX

OFFSET_INDEX_ENTRY = 8
TIME_INDEX_ENTRY = 12

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SegmentSize(Generic[T]):
    """What grouping needs to know of a segment; `segment` is carried through untouched."""

    segment: T
    base_offset: int
    log_bytes: int
    index_entries: int
    timeindex_entries: int


def group_by_size(sizes: list[SegmentSize[T]], *, max_log_bytes: int, max_index_bytes: int,
                  upper_bound: int) -> list[list[T]]:
    """Consecutive runs of `sizes`, each as large as the limits allow. `upper_bound` is one past the
    last offset the last segment may hold (the first uncleanable offset)."""
    groups: list[list[T]] = []
    i = 0
    while i < len(sizes):
        first = sizes[i]
        group = [first.segment]
        log_bytes, index_bytes, time_bytes = _bytes(first)
        i += 1
        while i < len(sizes):
            candidate = sizes[i]
            c_log, c_index, c_time = _bytes(candidate)
            last_offset = (sizes[i + 1].base_offset if i + 1 < len(sizes) else upper_bound) - 1
            fits = (log_bytes + c_log <= max_log_bytes and index_bytes + c_index <= max_index_bytes
                    and time_bytes + c_time <= max_index_bytes
                    and (c_log == 0 or last_offset - first.base_offset <= INT32_MAX))
            if not fits:
                break
            group.append(candidate.segment)
            log_bytes, index_bytes, time_bytes = log_bytes + c_log, index_bytes + c_index, time_bytes + c_time
            i += 1
        groups.append(group)
    return groups


def _bytes(size: SegmentSize[T]) -> tuple[int, int, int]:
    return (size.log_bytes, size.index_entries * OFFSET_INDEX_ENTRY,
            size.timeindex_entries * TIME_INDEX_ENTRY)
