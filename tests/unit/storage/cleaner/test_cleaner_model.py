"""The cleaner against a model, on real files: for every key the latest value survives at its original
offset, tombstones vanish after their window, offsets stay increasing, nothing else changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.protocol.records.batch import iter_batches
from pybroker.storage.cleaner.grouping import SegmentSize, group_by_size
from tests.unit.storage.cleaner.helpers import (
    DAY_MS,
    NOW,
    abandon,
    append,
    clean_fully,
    cleaner,
    consume,
    expected_after_clean,
    open_log,
    records_of,
)

pytestmark = pytest.mark.usefixtures("cleaner_kind")  # each test: in-process, then worker process

KEYS = [b"k%d" % i for i in range(6)]
#: one batch: (key index, value or None for a tombstone) records
batches = st.lists(st.tuples(st.integers(0, len(KEYS) - 1), st.one_of(st.none(), st.binary(min_size=1, max_size=4))),
                   min_size=1, max_size=4)
#: a log: batches, each maybe followed by a roll
histories = st.lists(st.tuples(batches, st.booleans()), min_size=1, max_size=30)


def _write(tmp: Path, history: list[tuple[list[tuple[int, bytes | None]], bool]], **config: object):  # type: ignore[no-untyped-def]
    clock = [NOW]
    log = open_log(tmp, clock=clock, **config)
    for records, roll in history:
        append(log, [(KEYS[k], v) for k, v in records])
        if roll:
            log.roll()
    return log, clock


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(history=histories, map_keys=st.integers(1, 8), segment_bytes=st.sampled_from([150, 400, 1 << 20]))
def test_clean_keeps_exactly_the_latest_of_each_key(tmp_path_factory, history, map_keys, segment_bytes) -> None:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("log") / "t-0"
    log, clock = _write(tmp, history, segment_bytes=segment_bytes)
    written = records_of(log)
    bound = log.active_segment.base_offset
    segments_before = len(log.segments)
    end, _ = clean_fully(log, cleaner(map_keys))
    assert end == bound
    cleaned = records_of(log)
    assert cleaned == expected_after_clean(written, bound)
    assert [r[0] for r in cleaned] == sorted({r[0] for r in cleaned})
    assert consume(log) == cleaned  # a consumer fetching batch by batch sees the same
    assert len(log.segments) <= segments_before
    for segment in log.segments:  # batches inside every file still ascend
        offsets = [h.base_offset for _, h in iter_batches(segment.read_bytes(0, segment.size))]
        assert offsets == sorted(offsets) and all(o >= segment.base_offset for o in offsets)

    # a day later, one more clean: the tombstones below the bound are gone, nothing else changes
    clock[0] = NOW + DAY_MS
    clean_fully(log, cleaner(map_keys), now_ms=clock[0], first_dirty=bound)
    assert records_of(log) == expected_after_clean(written, bound, tombstones=False)

    # and all of it is on disk: a reopen after a crash reads the same
    final = records_of(log)
    abandon(log)
    reopened = open_log(tmp, clean=False, clock=clock, segment_bytes=segment_bytes)
    assert records_of(reopened) == final
    assert consume(reopened) == final
    reopened.close()


def test_one_segment_with_far_more_keys_than_the_map_holds_is_cleaned_over_several_passes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for version in range(3):
        for key in range(300):
            append(log, [(b"key-%d" % key, b"v%d" % version)])
    log.roll()
    written = records_of(log)
    end, results = clean_fully(log, cleaner(40))
    assert end == log.active_segment.base_offset == 900
    assert len(results) > 10
    assert records_of(log) == expected_after_clean(written, 900)
    assert len(records_of(log)) == 300
    log.close()


def test_a_read_handed_out_before_the_swap_still_reads_the_old_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for version in range(5):
        append(log, [(b"a", b"v%d" % version), (b"b", b"w%d" % version)])
    log.roll()
    region = log.read(0, 1 << 20).region
    assert region is not None
    before = region.read_bytes()
    clean_fully(log, cleaner())
    assert region.read_bytes() == before  # the old file stays open for reads in flight
    assert [r[2] for r in records_of(log)] == [b"v4", b"w4"]
    assert log.release_retired(NOW)  # file.delete.delay.ms is 0 here: closed now
    log.close()


def test_the_last_batch_of_a_producer_survives_empty_and_its_state_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, [(b"a", b"1")], producer=(5, 0, 0))
    append(log, [(b"a", b"2")], producer=(6, 0, 0))
    append(log, [(b"a", b"3")], producer=(5, 0, 1))  # 5's last batch, superseded below
    append(log, [(b"a", b"4")])
    log.roll()
    clean_fully(log, cleaner())
    headers = [h for s in log.segments for _, h in iter_batches(s.read_bytes(0, s.size))]
    assert [(h.base_offset, h.producer_id, h.records_count) for h in headers] == [(1, 6, 0), (2, 5, 0), (3, -1, 1)]
    abandon(log)
    for snapshot in path.glob("*.snapshot"):
        snapshot.unlink()  # rebuild producer state from the cleaned log alone
    reopened = open_log(path, clean=False)
    entry = reopened.producer_state.producers[5]
    assert (entry.epoch, entry.last_seq, entry.batches[-1].last_offset) == (0, 1, 2)
    assert append(reopened, [(b"a", b"5")], producer=(5, 0, 2)) == 4  # the next sequence is accepted
    reopened.close()


def test_groups_merge_small_segments_within_the_limits() -> None:
    sizes = [SegmentSize(i, 10 * i, 100, 1, 1) for i in range(7)]
    assert group_by_size(sizes, max_log_bytes=250, max_index_bytes=1000, upper_bound=70) == [[0, 1], [2, 3], [4, 5], [6]]
    assert group_by_size(sizes, max_log_bytes=1000, max_index_bytes=24, upper_bound=70) == [[0, 1], [2, 3], [4, 5], [6]]
    wide = [SegmentSize("a", 0, 10, 0, 0), SegmentSize("b", 2**31, 10, 0, 0)]
    assert group_by_size(wide, max_log_bytes=1000, max_index_bytes=1000, upper_bound=2**31 + 5) == [["a"], ["b"]]
