"""Opening a log after a crash or a clean shutdown: torn and garbage tails, bad CRCs, lost indexes."""

from __future__ import annotations

import os
from pathlib import Path

from pybroker.storage.log import Log
from pybroker.storage.segment_names import base_offsets
from tests.unit.storage.helpers import NOW, TOPIC_ID, append, batch, config, log_file, open_log, read_spans

SMALL = {"segment_bytes": 1500, "index_interval_bytes": 200}


def _filled(path: Path, batches: int = 5, **config: int) -> list[int]:
    """Write `batches` batches of 2 records, close cleanly; returns each batch's file position."""
    log = open_log(path, **config)
    positions = []
    for _ in range(batches):
        positions.append(log.active_segment.size)
        append(log, batch(2))
    log.flush()
    log.close()
    return positions


def _spans(log: Log) -> dict[int, tuple[int, int]]:
    return {o: read_spans(log, o)[0] for o in range(0, log.log_end_offset, 3)}


def test_a_torn_tail_is_cut(tmp_path: Path) -> None:
    _filled(tmp_path / "t-0")
    segment = log_file(tmp_path / "t-0")
    os.truncate(segment, segment.stat().st_size - 7)
    log = open_log(tmp_path / "t-0", clean=False)
    assert log.log_end_offset == 8
    assert log.load_stats.segments_recovered == 1 and log.load_stats.bytes_truncated > 0
    assert append(log, batch(1)).base_offset == 8
    log.close()


def test_a_garbage_tail_is_cut(tmp_path: Path) -> None:
    _filled(tmp_path / "t-0")
    segment = log_file(tmp_path / "t-0")
    size = segment.stat().st_size
    with open(segment, "ab") as handle:
        handle.write(os.urandom(500))
    log = open_log(tmp_path / "t-0", clean=False)
    assert log.log_end_offset == 10 and segment.stat().st_size == size
    assert log.load_stats.bytes_truncated == 500
    log.close()


def test_a_bad_crc_cuts_everything_from_that_batch(tmp_path: Path) -> None:
    positions = _filled(tmp_path / "t-0")
    segment = log_file(tmp_path / "t-0")
    with open(segment, "r+b") as handle:
        handle.seek(positions[2] + 70)  # inside the records of the third batch
        byte = handle.read(1)
        handle.seek(positions[2] + 70)
        handle.write(bytes([byte[0] ^ 0xFF]))
    log = open_log(tmp_path / "t-0", clean=False)
    assert log.log_end_offset == 4 and segment.stat().st_size == positions[2]
    log.close()


def test_a_cut_in_an_older_segment_drops_the_later_ones(tmp_path: Path) -> None:
    _filled(tmp_path / "t-0", batches=30, **SMALL)
    second_base = sorted(int(p.name[:20]) for p in (tmp_path / "t-0").glob("*.log"))[1]
    first = log_file(tmp_path / "t-0")
    os.truncate(first, first.stat().st_size - 3)
    log = open_log(tmp_path / "t-0", clean=False, **SMALL)
    assert len(log.segments) == 1 and log.load_stats.segments_recovered == 1
    assert log.log_end_offset == second_base - 2  # the torn batch of two records is gone
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [first.name]
    log.close()


def test_segments_below_the_recovery_point_are_trusted(tmp_path: Path) -> None:
    _filled(tmp_path / "t-0", batches=30, **SMALL)
    log = open_log(tmp_path / "t-0", clean=False, recovery_point=60, **SMALL)
    assert log.load_stats.segments_recovered == 1  # only the last one, which holds the log end
    assert log.log_end_offset == 60
    log.close()
    log = open_log(tmp_path / "t-0", clean=False, recovery_point=0, **SMALL)
    assert log.load_stats.segments_recovered == len(log.segments) > 1
    log.close()


def test_deleted_indexes_are_rebuilt_and_lookups_stay_right(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=3000, index_interval_bytes=200)
    for i in range(40):
        append(log, batch(3, ts=1_700_000_000_000 + 100 * i))
    expected = _spans(log)
    by_time = log.offset_for_timestamp(1_700_000_002_050)
    assert by_time == (63, 1_700_000_002_100)
    log.close()
    for clean in (True, False):
        for path in (tmp_path / "t-0").glob("*index"):
            path.unlink()
        log = open_log(tmp_path / "t-0", clean=clean, segment_bytes=3000, index_interval_bytes=200)
        assert _spans(log) == expected
        assert log.offset_for_timestamp(1_700_000_002_050) == by_time
        assert all(s.index_path.exists() for s in log.segments)
        log.close()


def test_a_garbage_index_is_rebuilt(tmp_path: Path) -> None:
    _filled(tmp_path / "t-0", batches=30, **SMALL)
    index = log_file(tmp_path / "t-0", suffix=".index")
    index.write_bytes(os.urandom(64))
    log = open_log(tmp_path / "t-0", **SMALL)
    assert [read_spans(log, o)[0][0] <= o for o in range(0, 60, 5)] == [True] * 12
    log.close()


def test_clean_shutdown_opens_fast_and_lazily(tmp_path: Path) -> None:
    _filled(tmp_path / "t-0", batches=30, **SMALL)
    index = log_file(tmp_path / "t-0", suffix=".index")
    before = index.read_bytes()
    log = open_log(tmp_path / "t-0", clean=True, **SMALL)
    assert log.load_stats.segments_recovered == 0 and log.recovery_point == log.log_end_offset == 60
    older = log.segments[0]
    assert older._index is None and older._file is None  # nothing read yet
    assert read_spans(log, 1)[0] == (0, 1)
    assert older._index is not None and older.indexes_rebuilt == 0  # the file was trusted as it was
    assert index.read_bytes() == before
    assert append(log, batch(1)).base_offset == 60
    log.close()


def test_an_unfinished_roll_and_leftover_files_are_handled(tmp_path: Path) -> None:
    _filled(tmp_path / "t-0", batches=5)
    directory = tmp_path / "t-0"
    log_file(directory, 10).write_bytes(b"")  # a roll that created the file and crashed
    (directory / "00000000000000000003.index").write_bytes(b"orphan")
    (directory / "pybroker.tmp").write_bytes(b"half")
    (directory / "00000000000000000000.log.deleted").write_bytes(b"x")
    log = open_log(directory, clean=False)
    assert log.log_end_offset == 10 and [s.base_offset for s in log.segments] == [0, 10]
    assert not (directory / "00000000000000000003.index").exists()
    assert not (directory / "pybroker.tmp").exists() and not (directory / "00000000000000000000.log.deleted").exists()
    assert append(log, batch(1)).base_offset == 10
    log.close()


def test_only_kafka_file_names_give_base_offsets() -> None:
    """The loader, the swap completion and the producer snapshots read one listing of the dir through
    this; a name that is not 20 ASCII digits and the suffix is no segment of theirs."""
    names = ["00000000000000000010.log", "00000000000000000003.log", "00000000000000000003.index",
             "00000000000000000007.log.swap", "0000000000000000007.log", "000000000000000000070.log",
             "0000000000000000000\N{SUPERSCRIPT TWO}.log", "0000000000000000000\N{ARABIC-INDIC DIGIT ONE}.log",
             "partition.metadata", "abcdefghijklmnopqrst.log", ".log"]
    assert base_offsets(names, ".log") == [3, 10]
    assert base_offsets(names, ".log.swap") == [7]
    assert base_offsets(names, ".index") == [3]
    assert base_offsets([], ".log") == []


def test_a_log_start_beyond_the_data_starts_afresh(tmp_path: Path) -> None:
    _filled(tmp_path / "t-0", batches=2)
    log = Log(tmp_path / "t-0", "t", 0, TOPIC_ID, config(), clean=False, log_start_offset=50, clock_ms=lambda: NOW)
    assert log.log_start_offset == log.log_end_offset == 50
    assert append(log, batch(1)).base_offset == 50
    log.close()
