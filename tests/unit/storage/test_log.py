"""The partition log on real files: offsets, reads, rolls, sparse indexes, time lookups, truncation."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pybroker.protocol.records.batch import LOG_APPEND_TIME, crc_ok, iter_batches, parse_header, restamp
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage import segment as segment_module
from pybroker.storage.errors import LogClosedError, OffsetOutOfRange
from pybroker.storage.log import Log
from tests.unit.storage.helpers import NOW, append, batch, log_file, open_log, read_spans


def test_offsets_are_assigned_in_place_and_read_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first, second = batch(3), batch(2)
    assert append(log, first).base_offset == 0
    result = append(log, second)
    assert (result.base_offset, result.last_offset, result.duplicate) == (3, 4, False)
    assert parse_header(second).base_offset == 3  # patched in the caller's buffer
    assert log.log_end_offset == log.high_watermark == 5
    assert read_spans(log, 0) == [(0, 2), (3, 4)]
    assert read_spans(log, 4) == [(3, 4)]
    assert log.read(5, 100).region is None
    with pytest.raises(OffsetOutOfRange):
        log.read(6, 100)
    log.close()
    data = log_file(tmp_path / "t-0").read_bytes()
    headers = list(iter_batches(data))
    assert [h.base_offset for _, h in headers] == [0, 3]
    assert all(crc_ok(data, p, h) for p, h in headers)  # base offset and epoch are outside the CRC


def test_leader_epoch_is_patched(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    data = batch(1)
    log.append(data, [(0, parse_header(data))], now_ms=NOW, leader_epoch=7)
    assert parse_header(log.read(0, 1000).region.read_bytes()).partition_leader_epoch == 7  # type: ignore[union-attr]
    log.close()


def test_read_limits_keep_whole_batches_and_at_least_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    size = len(batch(10))
    for _ in range(3):
        append(log, batch(10))
    assert read_spans(log, 0, size + 10) == [(0, 9)]
    assert read_spans(log, 0, 5) == [(0, 9)]  # min one batch
    assert log.read(0, 5, min_one_batch=False).region is None
    assert read_spans(log, 0, 3 * size) == [(0, 9), (10, 19), (20, 29)]
    assert read_spans(log, 0, 3 * size - 1) == [(0, 9), (10, 19)]
    assert read_spans(log, 5, max_offset=20) == [(0, 9), (10, 19)]
    assert read_spans(log, 0, max_offset=15) == [(0, 9)]  # a batch reaching max_offset is left out
    assert log.read(10, 1 << 20, max_offset=10).region is None
    region = log.read(10, 1 << 20).region
    assert region is not None and len(region) == 2 * size and region.position == size
    log.close()


def test_a_read_with_no_room_looks_at_no_segment_but_still_checks_the_offset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(10))

    def looked(*_: object) -> None:
        raise AssertionError("a segment was read")

    monkeypatch.setattr(segment_module.Segment, "read_region", looked)
    assert log.read(3, 0, min_one_batch=False).region is None
    assert log.read(3, -1, min_one_batch=False, want_upper_bound=True).region is None
    with pytest.raises(OffsetOutOfRange):
        log.read(11, 0, min_one_batch=False)
    monkeypatch.undo()
    assert read_spans(log, 3, 0) == [(0, 9)]  # at least one batch is still read when asked for
    log.close()
    with pytest.raises(LogClosedError):
        log.read(3, 0, min_one_batch=False)


def test_a_read_with_room_for_less_than_the_remembered_batch_answers_nothing_without_a_lookup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the first partitions of a fetch over hundreds, what is left of the answer's bytes is smaller
    than each partition's next batch: the batch a read stopped before is remembered, so that read needs
    no lookup; its answer is a cold read's (nothing, or the batch when at least one is asked for)."""
    log = open_log(tmp_path / "t-0")
    for _ in range(10):
        append(log, batch(5, value=b"x" * 200))
    first = log.read(0, 3000)
    assert first.region is not None
    next_offset = [h for _, h in iter_batches(first.region.read_bytes())][-1].last_offset + 1

    def looked(*_: object) -> None:
        raise AssertionError("looked up")

    monkeypatch.setattr(segment_module.Segment, "find", looked)
    monkeypatch.setattr(segment_module.os, "pread", looked)
    assert log.read(next_offset, 100, min_one_batch=False).region is None
    assert log.read(next_offset + 2, 100, min_one_batch=False).region is None  # inside that batch
    assert log.read(next_offset, 5000, max_offset=next_offset + 3, min_one_batch=False).region is None
    monkeypatch.undo()
    assert read_spans(log, next_offset, 100) == [(next_offset, next_offset + 4)]  # one batch, whole
    other = open_log(tmp_path / "t-0")
    assert other.read(next_offset, 100, min_one_batch=False).region is None  # the same answer, cold
    other.close()
    log.close()


def test_a_read_that_fits_nothing_remembers_its_batch_so_the_same_ask_needs_no_lookup_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetch over a thousand partitions spends its bytes on the first fifty; each of the others is asked
    for at the same offset fetch after fetch until its turn comes. Only its first ask is looked up: the
    batch found is remembered, as is a batch past the read's offset limit (an open transaction's)."""
    log = open_log(tmp_path / "t-0", index_interval_bytes=300)
    for _ in range(10):
        append(log, batch(5, value=b"x" * 200))
    assert log.read(20, 100, min_one_batch=False).region is None  # looked up: fits nothing
    assert log.read(30, 5000, max_offset=32, min_one_batch=False).region is None  # past the limit
    warm = open_log(tmp_path / "t-0", index_interval_bytes=300)
    assert warm.read(20, 100, min_one_batch=False).region is None

    def looked(*_: object) -> None:
        raise AssertionError("looked up")

    monkeypatch.setattr(segment_module.os, "pread", looked)
    assert warm.read(20, 100, min_one_batch=False).region is None
    assert warm.read(22, 100, min_one_batch=False).region is None  # inside that batch
    monkeypatch.undo()
    assert read_spans(warm, 20, 100) == [(20, 24)]  # at least one batch: the remembered one, whole
    monkeypatch.setattr(segment_module.os, "pread", looked)
    assert log.read(30, 5000, max_offset=32, min_one_batch=False).region is None
    monkeypatch.undo()
    warm.close()
    log.close()


def test_segments_roll_by_size_and_the_sparse_index_finds_every_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=2000, index_interval_bytes=300)
    for _ in range(60):
        append(log, batch(4, value=b"x" * 20))
    assert len(log.segments) > 3
    assert all(s.size <= 2000 for s in log.segments)
    assert all(1 <= len(s.index) < 10 for s in log.segments[:-1])  # sparse, not one per batch
    for offset in range(0, 240):
        base, last = read_spans(log, offset, 1)[0]
        assert base <= offset <= last
    reads = [log.read(o, 1 << 20).region for o in (0, 100, 239)]
    assert all(r is not None and r.position + len(r) <= 2000 for r in reads)  # one segment per read
    log.close()
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    assert any(n.endswith(".timeindex") for n in names) and any(n.endswith(".snapshot") for n in names)


def test_index_entries_follow_kafkas_interval_rule(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=250)
    size = len(batch(2))
    for _ in range(12):
        append(log, batch(2))
    log.close()
    entries = list(struct.iter_unpack(">ii", log_file(tmp_path / "t-0", suffix=".index").read_bytes()))
    # an entry for a batch once more than 250 bytes were written since the last indexed batch
    step = 250 // size + 1
    positions = [p for _, p in entries]
    assert positions == [i * size for i in range(step, 12, step)]
    assert all(rel == 2 * (p // size) + 1 for rel, p in entries)  # keyed by the batch's last offset


def test_roll_by_time_counts_from_the_first_batch_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_ms=1000)
    append(log, batch(1, ts=NOW))
    append(log, batch(1, ts=NOW + 1000))
    assert len(log.segments) == 1
    append(log, batch(1, ts=NOW + 1001))
    assert len(log.segments) == 2 and log.segments[1].base_offset == 2
    log.close()


def test_roll_when_the_index_is_full(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=1, max_index_bytes=8 * 3)
    for _ in range(12):
        append(log, batch(1))
    assert len(log.segments) >= 3 and all(len(s.index) <= 3 for s in log.segments)
    assert read_spans(log, 11) == [(11, 11)]
    log.close()


def test_roll_before_relative_offsets_overflow(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(1))
    segment = log.active_segment
    assert segment.index.can_append_offset(2**31 - 1) and not segment.index.can_append_offset(2**31)
    assert segment.should_roll(append_size=10, append_max_timestamp=NOW, append_last_offset=2**31,
                               segment_bytes=1 << 30, segment_ms=1 << 40, now_ms=NOW)
    log.close()


def test_offset_for_timestamp_finds_the_first_record(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=1, segment_bytes=600)
    for i in range(10):
        append(log, batch(3, ts=NOW + 1000 * (i + 1)))
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(0) == (0, NOW + 1000)
    assert log.offset_for_timestamp(NOW + 5001) == (13, NOW + 5001)  # inside the fifth batch
    assert log.offset_for_timestamp(NOW + 10_002) == (29, NOW + 10_002)
    assert log.offset_for_timestamp(NOW + 99_999) is None
    assert log.max_timestamp_and_offset() == (NOW + 10_002, 29)
    log.close()


def test_max_timestamp_points_at_the_first_record_carrying_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.max_timestamp_and_offset() == (-1, -1)
    records = [Record(0, 5, None, b"a"), Record(1, 9, None, b"b"), Record(2, 9, None, b"c"), Record(3, 1, None, b"d")]
    data = bytearray(build_batch(records, base_timestamp=NOW))
    append(log, batch(2, ts=NOW - 50))
    append(log, data)
    assert log.max_timestamp_and_offset() == (NOW + 9, 3)
    log.close()


def test_log_append_time_batches_answer_at_their_stamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_ms=10)
    data = batch(3, ts=NOW - 10_000)
    # the caller gives the header as stamped (`restamp` builds it): the log does not parse it again
    header = restamp(data, 0, parse_header(data), LOG_APPEND_TIME, NOW + 500)
    log.append(data, [(0, header)], now_ms=NOW + 500)
    assert log.active_segment.max_timestamp == NOW + 500
    assert log.offset_for_timestamp(NOW) == (0, NOW + 500)
    assert log.max_timestamp_and_offset() == (NOW + 500, 0)
    log.close()


def test_truncate_to_removes_whole_batches_and_appends_continue(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=700, index_interval_bytes=1)
    for _ in range(20):
        append(log, batch(2))
    segments = len(log.segments)
    log.truncate_to(21)  # inside batch 20..21: the whole batch goes
    assert log.log_end_offset == 20 and len(log.segments) < segments
    assert read_spans(log, 18) == [(18, 19)]
    assert append(log, batch(2)).base_offset == 20
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size_bytes == 0 and len(log.segments) == 1
    assert append(log, batch(1)).base_offset == 0
    log.close()
    log = open_log(tmp_path / "t-0", clean=False, segment_bytes=700)
    assert log.log_end_offset == 1
    log.close()


def test_closed_log_refuses_work(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(1))
    log.close()
    with pytest.raises(LogClosedError):
        append(log, batch(1))
    with pytest.raises(LogClosedError):
        log.read(0, 100)
    with pytest.raises(LogClosedError):
        log.flush()


def test_delete_keeps_handed_out_regions_readable_until_released(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(2))
    region = log.read(0, 1000).region
    assert region is not None
    log.delete()
    assert not (tmp_path / "t-0").exists() and not list(tmp_path.iterdir())
    assert parse_header(region.read_bytes()).last_offset == 1  # still sendable
    assert log.release_retired(NOW) is False  # file.delete.delay.ms has not passed
    assert log.release_retired(NOW + 60_000) is True
    assert region.file.closed


def test_flush_advances_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(4))
    assert log.recovery_point == 0 and log.unflushed_messages == 4
    assert log.flush() == 4
    assert log.recovery_point == 4 and log.unflushed_messages == 0
    assert log.flush(up_to=3) == 4
    log.close()


def test_a_read_resumes_where_the_last_one_stopped_without_scanning(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch a byte-limited read stopped before is remembered: the consumer's next fetch, which
    starts there, needs no index lookup or header `pread`; the answers are those of a cold read; a
    truncation forgets it."""
    log = open_log(tmp_path / "t-0")
    for _ in range(40):
        append(log, batch(5, value=b"x" * 200))
    first = log.read(0, 8000, want_upper_bound=True)
    assert first.region is not None
    spans = [(h.base_offset, h.last_offset) for _, h in iter_batches(first.region.read_bytes())]
    next_offset = spans[-1][1] + 1
    assert first.upper_bound == next_offset
    other = open_log(tmp_path / "t-0")
    preads: list[Log] = []
    real = segment_module.os.pread
    for reader in (log, other):
        monkeypatch.setattr(segment_module.os, "pread", lambda *args, r=reader: preads.append(r) or real(*args))
        reader.read(next_offset, 8000)
        monkeypatch.undo()
    assert preads.count(log) < preads.count(other)  # no index lookup, no header read to find the start
    warm = read_spans(log, next_offset, 8000)
    cold = read_spans(other, next_offset, 8000)
    other.close()
    assert warm == cold and warm[0][0] == next_offset
    log.truncate_to(next_offset + 2)  # cuts the remembered batch away
    assert read_spans(log, next_offset, 8000) == []
    assert log.log_end_offset == next_offset
    log.close()
