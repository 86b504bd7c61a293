"""The sparse index files: Kafka's byte layout, preallocation and trimming, lookups, truncation, checks."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pybroker.storage.errors import CorruptIndexError
from pybroker.storage.offset_index import OffsetIndex
from pybroker.storage.time_index import TimeIndex


def test_offset_index_is_preallocated_then_trimmed_to_kafka_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex.create(path, 100, 1000)
    assert path.stat().st_size == 1000  # 125 whole entries
    index.append(105, 4200)
    index.append(111, 9000)
    index.append(111, 9999)  # not larger than the last offset: ignored
    index.trim()
    assert path.read_bytes() == struct.pack(">iiii", 5, 4200, 11, 9000)
    assert index.lookup(99) == 0 and index.lookup(104) == 0
    assert index.lookup(105) == 4200 and index.lookup(110) == 4200 and index.lookup(5000) == 9000
    assert index.entry_at_or_before(104) is None and index.entry_at_or_before(110) == (105, 4200)
    assert index.entry_at_or_before_position(8999) == (105, 4200)
    assert index.entry_at_or_before_position(9000) == (111, 9000)
    assert index.last_entry() == (111, 9000)


def test_time_index_layout_and_lookup(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000010.timeindex"
    index = TimeIndex.create(path, 10, 12 * 10)
    assert path.stat().st_size == 120
    index.maybe_append(1000, 12)
    index.maybe_append(1000, 15)  # the timestamp did not grow: no entry
    index.maybe_append(2000, 20)
    index.trim()
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 2, 2000, 10)
    assert index.lookup(999) == (-1, 10)
    assert index.lookup(1000) == (1000, 12) and index.lookup(1999) == (1000, 12)
    assert index.lookup(10**15) == (2000, 20)
    assert index.last_entry() == (2000, 20)


def test_time_index_keeps_its_last_slot_for_the_roll_entry(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "0.timeindex", 0, 12 * 3)
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full
    index.maybe_append(3, 3)
    assert len(index) == 2
    index.maybe_append(3, 3, skip_full_check=True)
    assert len(index) == 3


def test_load_ignores_unwritten_preallocated_space(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex.create(path, 0, 8 * 100)
    for i in range(1, 6):
        index.append(i * 10, i * 256)  # positions with zero low bytes must survive the zero-stripping
    index.preallocate(8 * 100)  # writes the pending entries, keeps the file full size
    assert path.stat().st_size == 800
    loaded = OffsetIndex.load(path, 0, 8 * 100)
    assert list(loaded.keys) == [10, 20, 30, 40, 50]
    assert list(loaded.values) == [256, 512, 768, 1024, 1280]
    times = TimeIndex.create(tmp_path / "t.timeindex", 0, 120)
    times.maybe_append(2**40, 0)  # relative offset 0: its last four bytes are zero
    times.preallocate(120)
    assert TimeIndex.load(tmp_path / "t.timeindex", 0, 120).last_entry() == (2**40, 0)


def test_truncation_drops_entries_at_or_after_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex.create(path, 0, 800)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    index.trim()
    index.truncate_to(30)
    assert list(index.keys) == [10, 20]
    assert path.read_bytes() == struct.pack(">iiii", 10, 100, 20, 200)
    times = TimeIndex.create(tmp_path / "t", 0, 120)
    for ts, offset in ((5, 10), (6, 20), (7, 30)):
        times.maybe_append(ts, offset)
    times.truncate_to(20)
    assert list(times.keys) == [5]


@pytest.mark.parametrize("data", [
    struct.pack(">iiii", 10, 500, 5, 100),  # offsets going backwards
    struct.pack(">iiiiii", 1, 100, 9, 50, 12, 600),  # positions going backwards in the middle
    struct.pack(">ii", -4, 100),  # negative relative offset
    b"\x00\x00\x00\x01\x00",  # not a whole number of entries
])
def test_corrupt_offset_index_is_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(data)
    with pytest.raises(CorruptIndexError):
        OffsetIndex.load(path, 0, 800)


def test_corrupt_time_index_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    path.write_bytes(struct.pack(">qiqi", 50, 1, 10, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex.load(path, 0, 120)
