"""Which of a log's oldest segments retention removes: pure rules over plain facts, Kafka's semantics.

Three breaches, checked segment by segment from the oldest, stopping at the first segment none applies
to (retention only ever removes a prefix of the log):

- time (`retention.ms` >= 0): the segment's largest timestamp is older than `now - retention.ms` (a
  segment without timestamps is never old by time);
- size (`retention.bytes` >= 0): the log is larger than `retention.bytes` even without this segment
  and every older one already chosen;
- log start (always, whatever the cleanup policy): the whole segment lies below the log start offset
  (raised by DeleteRecords).

Time and size apply only when the cleanup policy includes `delete`. Never the active (last) segment,
never a segment reaching the high watermark, never anything of an empty log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class SegmentLike(Protocol):
    """What the rules read of a segment (a `Segment` is one; its max timestamp is read only when asked)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def max_timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SegmentFacts:
    base_offset: int
    #: one past the segment's last offset (the next segment's base offset for all but the last)
    next_offset: int
    size: int
    #: largest record timestamp in the segment (-1 when it has none)
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class RetentionRules:
    retention_ms: int
    retention_bytes: int
    delete_policy: bool


@dataclass(frozen=True, slots=True)
class Verdict:
    """How many of the oldest segments go, and why (for the log line)."""

    count: int
    reason: str = ""


KEEP = Verdict(0)


def deletable_prefix(segments: Sequence[SegmentLike], rules: RetentionRules, *, now_ms: int,
                     log_start_offset: int, high_watermark: int) -> Verdict:
    if len(segments) < 2:
        return KEEP  # only the active segment (or nothing)
    over = sum(s.size for s in segments) - rules.retention_bytes if rules.retention_bytes >= 0 else -1
    reasons: list[str] = []
    count = 0
    for segment in segments[:-1]:  # never the active segment
        if segment.next_offset > high_watermark:
            break
        reason = _breach(segment, rules, now_ms, log_start_offset, over)
        if reason is None:
            break
        over -= segment.size  # whatever removed it, the log is that much smaller
        if reason not in reasons:
            reasons.append(reason)
        count += 1
    return Verdict(count, ", ".join(reasons)) if count else KEEP


def _breach(segment: SegmentLike, rules: RetentionRules, now_ms: int, log_start_offset: int,
            over: int) -> str | None:
    if segment.next_offset <= log_start_offset:
        return "log start offset"
    if not rules.delete_policy:
        return None
    if rules.retention_ms >= 0 and segment.max_timestamp >= 0 and now_ms - segment.max_timestamp > rules.retention_ms:
        return "retention.ms"
    if rules.retention_bytes >= 0 and over - segment.size >= 0:
        return "retention.bytes"
    return None
