"""A compacted log's sections and how dirty it is (Kafka's `LogToClean` and `cleanableOffsets`).

    [log start ... first dirty)   clean: compacted by earlier cleans
    [first dirty ... first uncleanable)   cleanable: what the next clean maps
    [first uncleanable ... log end)   never touched: the active segment, every segment holding a
                                      record younger than min.compaction.lag.ms, and everything from
                                      the last stable offset on (an open transaction may yet abort)

The first dirty offset is the cleaner checkpoint; one outside the log (truncation, a lost checkpoint)
falls back to the log start. The dirty ratio, cleanable / (clean + cleanable) bytes, is what picks the
filthiest log; it must exceed min.cleanable.dirty.ratio, unless a dirty record has waited longer than
max.compaction.lag.ms, which forces a clean.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.storage.log import Log
from pybroker.storage.log_config import LONG_MAX


@dataclass(frozen=True, slots=True)
class DirtySection:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    #: a dirty record waited longer than max.compaction.lag.ms
    overdue: bool

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    def needs_cleaning(self, min_ratio: float) -> bool:
        return self.cleanable_bytes > 0 and (self.overdue or self.ratio > min_ratio)


def dirty_section(log: Log, checkpoint: int | None, now_ms: int) -> DirtySection:
    """Where the log's clean, cleanable and uncleanable parts begin, measured in whole segments."""
    segments = log.segments
    inactive, active = segments[:-1], segments[-1]
    start = log.log_start_offset
    first_dirty = checkpoint if checkpoint is not None and start <= checkpoint <= active.next_offset else start
    first_uncleanable = active.base_offset
    config = log.config
    dirty = [s for s in inactive if s.next_offset > first_dirty]
    if config.min_compaction_lag_ms > 0:
        young_after = now_ms - config.min_compaction_lag_ms
        young = next((s for s in dirty if s.max_timestamp > young_after), None)
        if young is not None:
            first_uncleanable = young.base_offset
    first_uncleanable = min(first_uncleanable, log.last_stable_offset)
    first_uncleanable = max(first_uncleanable, min(first_dirty, active.base_offset))
    cleanable = [s for s in dirty if s.base_offset < first_uncleanable]
    overdue = False
    if cleanable and config.max_compaction_lag_ms < LONG_MAX:
        first = cleanable[0]
        written = first.rolling_timestamp if first.rolling_timestamp >= 0 else first.created_ms
        overdue = now_ms - written > config.max_compaction_lag_ms
    return DirtySection(first_dirty, first_uncleanable, sum(s.size for s in inactive if s.next_offset <= first_dirty),
                        sum(s.size for s in cleanable), overdue)
