"""Retention's rules against a model, and against real segment files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.storage.errors import OffsetOutOfRange
from pybroker.storage.log import Log
from pybroker.storage.retention import RetentionRules, SegmentFacts, deletable_prefix
from tests.unit.storage.helpers import NOW as HELPER_NOW
from tests.unit.storage.helpers import append, batch, open_log

NOW = 1_000_000


def segments_from(sizes_and_ages: list[tuple[int, int, int]]) -> list[SegmentFacts]:
    """(size, records, age) per segment, oldest first; consecutive offsets."""
    out = []
    base = 0
    for size, records, age in sizes_and_ages:
        out.append(SegmentFacts(base, base + records, size, NOW - age))
        base += records
    return out


def model(segments: list[SegmentFacts], rules: RetentionRules, start: int, hw: int) -> int:
    """The rules written the slow, obvious way: keep removing the oldest while one breach applies."""
    kept = list(segments)
    removed = 0
    while len(kept) > 1 and kept[0].next_offset <= hw:
        first = kept[0]
        by_start = first.next_offset <= start
        by_time = rules.delete_policy and rules.retention_ms >= 0 and NOW - first.max_timestamp > rules.retention_ms
        by_size = rules.delete_policy and rules.retention_bytes >= 0 and (
            sum(s.size for s in kept) - first.size >= rules.retention_bytes)
        if not (by_start or by_time or by_size):
            break
        kept.pop(0)
        removed += 1
    return removed


segment_lists = st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 50), st.integers(0, 5000)),
                         min_size=0, max_size=12)
rule_sets = st.builds(RetentionRules, st.sampled_from([-1, 0, 100, 2500, 10_000]),
                      st.sampled_from([-1, 0, 500, 3000, 100_000]), st.booleans())


@given(segment_lists, rule_sets, st.integers(0, 700), st.integers(0, 700))
def test_matches_the_model(raw: list[tuple[int, int, int]], rules: RetentionRules, start: int, hw: int) -> None:
    segments = segments_from(raw)
    verdict = deletable_prefix(segments, rules, now_ms=NOW, log_start_offset=start, high_watermark=hw)
    assert verdict.count == model(segments, rules, start, hw)
    assert verdict.count < max(len(segments), 1)  # never the active segment


def test_reasons_are_named() -> None:
    segments = segments_from([(100, 10, 9000), (100, 10, 10), (100, 10, 0)])
    verdict = deletable_prefix(segments, RetentionRules(5000, -1, True), now_ms=NOW, log_start_offset=0,
                               high_watermark=30)
    assert (verdict.count, verdict.reason) == (1, "retention.ms")
    verdict = deletable_prefix(segments, RetentionRules(-1, -1, False), now_ms=NOW, log_start_offset=20,
                               high_watermark=30)
    assert (verdict.count, verdict.reason) == (2, "log start offset")


def test_compact_only_logs_keep_old_data_but_honour_the_log_start() -> None:
    segments = segments_from([(100, 10, 90_000), (100, 10, 90_000), (100, 10, 0)])
    rules = RetentionRules(1, 1, False)
    assert deletable_prefix(segments, rules, now_ms=NOW, log_start_offset=0, high_watermark=30).count == 0
    assert deletable_prefix(segments, rules, now_ms=NOW, log_start_offset=10, high_watermark=30).count == 1


def _filled_log(path: Path, **overrides: int) -> Log:
    log = open_log(path, segment_bytes=300, **overrides)
    for _ in range(10):
        append(log, batch(3))
    return log


def test_log_segments_go_to_deleted_then_disappear_and_the_start_moves(tmp_path: Path) -> None:
    log = _filled_log(tmp_path / "t-0", retention_ms=1000, file_delete_delay_ms=500)
    segments_before = len(log.segments)
    assert segments_before > 3
    newest = max(s.max_timestamp for s in log.segments)
    assert log.delete_old_segments(newest + 1000).count == 0
    verdict = log.delete_old_segments(newest + 1001)
    assert verdict.count == segments_before - 1 and verdict.reason == "retention.ms"
    assert log.log_start_offset == log.segments[0].base_offset > 0
    deleted = sorted(p.name for p in (tmp_path / "t-0").glob("*.deleted"))
    assert deleted and all(n.endswith((".log.deleted", ".index.deleted", ".timeindex.deleted")) for n in deleted)
    log.release_retired(newest + 1001 + 499)
    assert list((tmp_path / "t-0").glob("*.deleted"))
    log.release_retired(newest + 1001 + 500)
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    log.close()


def test_size_retention_keeps_the_newest_within_the_limit(tmp_path: Path) -> None:
    log = _filled_log(tmp_path / "t-0", retention_bytes=400)
    verdict = log.delete_old_segments(HELPER_NOW)
    assert verdict.reason == "retention.bytes"
    assert log.size_bytes - log.segments[0].size < 400  # one more would take it under the limit
    log.close()


def test_delete_records_moves_the_start_and_retention_then_drops_whole_segments(tmp_path: Path) -> None:
    log = _filled_log(tmp_path / "t-0", file_delete_delay_ms=0)
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(log.high_watermark + 1)
    assert log.delete_records_before(17) == 17
    assert log.delete_records_before(5) == 17  # never backwards
    verdict = log.delete_old_segments(HELPER_NOW)
    assert verdict.reason == "log start offset"
    assert log.segments[0].base_offset <= 17 < log.segments[0].next_offset
    assert log.log_start_offset == 17
    with pytest.raises(OffsetOutOfRange):
        log.read(16, 1000)
    log.close()
    reopened = open_log(tmp_path / "t-0", segment_bytes=300)  # the loader starts at the first segment left
    assert reopened.log_start_offset == reopened.segments[0].base_offset
    reopened.close()


def test_leftover_deleted_files_are_removed_at_startup(tmp_path: Path) -> None:
    log = _filled_log(tmp_path / "t-0", file_delete_delay_ms=60_000)
    log.delete_records_before(20)
    log.delete_old_segments(HELPER_NOW)
    assert list((tmp_path / "t-0").glob("*.deleted"))
    log.close()  # a crash would leave them too
    for leftover in (tmp_path / "t-0").glob("*.deleted"):
        leftover.touch()
    open_log(tmp_path / "t-0", segment_bytes=300).close()
    assert not list((tmp_path / "t-0").glob("*.deleted"))
