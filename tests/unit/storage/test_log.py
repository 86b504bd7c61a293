"""The partition log on real files: appends, reads, rolls, indexes, time lookups and recovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.protocol.records.batch import iter_batches, parse_header
from pybroker.storage.errors import OffsetOutOfRange
from pybroker.storage.log import Log
from tests.unit.storage.helpers import append, batch, open_log


def _read_offsets(log: Log, offset: int, max_bytes: int = 1 << 20) -> list[tuple[int, int]]:
    region = log.read(offset, max_bytes).region
    if region is None:
        return []
    data = region.read_bytes()
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]


def test_offsets_are_assigned_and_read_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert append(log, batch(3)).base_offset == 0
    assert append(log, batch(2)).base_offset == 3
    assert log.log_end_offset == 5
    assert _read_offsets(log, 0) == [(0, 2), (3, 4)]
    assert _read_offsets(log, 4) == [(3, 4)]
    assert _read_offsets(log, 5) == []
    with pytest.raises(OffsetOutOfRange):
        log.read(6, 100)
    log.close()


def test_read_limits_keep_whole_batches_and_at_least_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sizes = [len(batch(10)) for _ in range(3)]
    for _ in range(3):
        append(log, batch(10))
    assert _read_offsets(log, 0, sizes[0] + 10) == [(0, 9)]
    assert _read_offsets(log, 0, 5) == [(0, 9)]  # min one batch
    assert log.read(0, 5, min_one_batch=False).region is None
    assert _read_offsets(log, 0, sum(sizes)) == [(0, 9), (10, 19), (20, 29)]
    assert log.read(0, 1 << 20, max_offset=10).region is not None
    assert _read_offsets(log, 0) and log.read(10, 1 << 20, max_offset=10).region is None
    log.close()


def test_segments_roll_and_sparse_index_finds_every_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=2000, index_interval_bytes=300)
    for _ in range(60):
        append(log, batch(4, value=b"x" * 20))
    assert len(log.segments) > 3
    assert all(len(s.index) > 1 for s in log.segments[:-1])
    for offset in range(0, 240, 7):
        first = _read_offsets(log, offset)[0]
        assert first[0] <= offset <= first[1]
    log.close()
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    assert any(n.endswith(".timeindex") for n in names)


def test_offset_for_timestamp_finds_the_first_record(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=1)
    for i in range(10):
        append(log, batch(3, ts=1000 * (i + 1)))
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(5001) == (13, 5001)  # inside the fifth batch: record ts 5000, 5001, 5002
    assert log.offset_for_timestamp(99_999) is None
    assert log.max_timestamp_and_offset() == (10_002, 29)
    log.close()


def _reopen(path: Path, clean: bool, **config: int) -> Log:
    return open_log(path, clean=clean, **config)


def test_recovery_cuts_a_torn_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(5):
        append(log, batch(2))
    log.close()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    os.truncate(segment, segment.stat().st_size - 7)
    log = _reopen(tmp_path / "t-0", clean=False)
    assert log.log_end_offset == 8
    assert log.stats.bytes_truncated > 0
    assert append(log, batch(1)).base_offset == 8
    log.close()


def test_recovery_cuts_a_garbage_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(5):
        append(log, batch(2))
    log.close()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    with open(segment, "ab") as handle:
        handle.write(os.urandom(500))
    log = _reopen(tmp_path / "t-0", clean=False)
    assert log.log_end_offset == 10
    assert segment.stat().st_size == size
    log.close()


def test_recovery_truncates_from_a_bad_crc(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    positions = []
    for _ in range(5):
        positions.append(log.active.size)
        append(log, batch(2))
    log.close()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    with open(segment, "r+b") as handle:
        handle.seek(positions[2] + 70)
        byte = handle.read(1)
        handle.seek(positions[2] + 70)
        handle.write(bytes([byte[0] ^ 0xFF]))
    log = _reopen(tmp_path / "t-0", clean=False)
    assert log.log_end_offset == 4
    log.close()


def test_deleted_indexes_are_rebuilt(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=3000, index_interval_bytes=200)
    for i in range(40):
        append(log, batch(3, ts=100 * i))
    expected = {o: _read_offsets(log, o)[0] for o in range(0, 120, 5)}
    log.close()
    for path in (tmp_path / "t-0").glob("*index"):
        path.unlink()
    for clean in (True, False):
        log = _reopen(tmp_path / "t-0", clean=clean, segment_bytes=3000, index_interval_bytes=200)
        assert {o: _read_offsets(log, o)[0] for o in range(0, 120, 5)} == expected
        assert log.offset_for_timestamp(2050) == (63, 2100)
        log.close()


def test_clean_reopen_keeps_everything_and_appends_continue(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1500)
    for _ in range(30):
        append(log, batch(2))
    log.flush()
    log.close()
    log = _reopen(tmp_path / "t-0", clean=True, segment_bytes=1500)
    assert log.log_end_offset == 60
    assert append(log, batch(1)).base_offset == 60
    assert _read_offsets(log, 59)[0] == (58, 59)
    log.close()


def test_flush_advances_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(4))
    assert log.recovery_point == 0 and log.unflushed_messages == 4
    assert log.flush() == 4
    assert log.recovery_point == 4 and log.unflushed_messages == 0
    log.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(1, 6), min_size=1, max_size=40), seg=st.integers(300, 3000),
       probes=st.lists(st.integers(0, 200), max_size=20))
def test_log_property_reads_and_reopen(tmp_path_factory: pytest.TempPathFactory, counts: list[int], seg: int,
                                       probes: list[int]) -> None:
    path = tmp_path_factory.mktemp("prop") / "t-0"
    log = open_log(path, segment_bytes=seg, index_interval_bytes=100)
    bounds = []
    for n in counts:
        result = append(log, batch(n))
        bounds.append((result.base_offset, result.last_offset))
    end = log.log_end_offset
    assert end == sum(counts)

    def containing(offset: int) -> tuple[int, int]:
        return next(b for b in bounds if b[0] <= offset <= b[1])

    for probe in probes:
        if probe < end:
            assert _read_offsets(log, probe)[0] == containing(probe)
    log.close()
    log = _reopen(path, clean=False, segment_bytes=seg, index_interval_bytes=100)
    assert log.log_end_offset == end
    for probe in probes:
        if probe < end:
            assert _read_offsets(log, probe)[0] == containing(probe)
    log.close()


def test_patched_batches_on_disk_keep_valid_crcs(tmp_path: Path) -> None:
    from pybroker.protocol.records.batch import crc_ok

    log = open_log(tmp_path / "t-0")
    for _ in range(3):
        append(log, batch(2))
    data = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    headers = list(iter_batches(data))
    assert [h.base_offset for _, h in headers] == [0, 2, 4]
    assert all(crc_ok(data, p, h) for p, h in headers)
    assert parse_header(data).partition_leader_epoch == 0
    log.close()
