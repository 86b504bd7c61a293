"""The page-cache budget: what it counts, what it drops, and that the kernel really lets the pages go.

Whether a page is cached is asked of the kernel itself (`mincore`, which reads nothing). On a filesystem whose pages
are its storage (tmpfs) nothing can be dropped, and the tests that look at real pages skip.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.protocol.records.batch import iter_batches
from pybroker.protocol.records.record import decode_records
from pybroker.storage.log import Log
from pybroker.storage.page_cache import (
    DROP_ALIGN,
    MAX_RANGES,
    READ_AHEAD,
    READ_AHEAD_FACTOR,
    READ_AHEAD_PIECE,
    WRITE_BACK_STEP,
    Droppable,
    PageCache,
    read_ahead_piece,
)
from tests.unit.storage.helpers import TOPIC_ID, append, batch, config

MIB = 1 << 20


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mmap.restype = ctypes.c_void_p
_LIBC.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64)
_LIBC.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
_LIBC.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_PAGE = mmap.PAGESIZE


def cached(fd: int, offset: int, length: int = 4096) -> bool:
    """Is all of [offset, offset + length) in the page cache? Asked with `mincore` over a mapping that is
    never touched, so asking reads nothing (a read that fails where the data is not cached, such as
    `preadv2(RWF_NOWAIT)`, starts the kernel's read-ahead as it fails)."""
    first = offset - offset % _PAGE
    size = offset + length - first
    address = _LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, first)
    assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    try:
        pages = ctypes.create_string_buffer(-(-size // _PAGE))
        assert _LIBC.mincore(address, size, pages) == 0, os.strerror(ctypes.get_errno())
        return all(flag & 1 for flag in pages.raw)
    finally:
        _LIBC.munmap(address, size)


def finish(cache: PageCache) -> None:
    """Close the budget and wait until its thread has done every queued write-back, drop and read-ahead
    call. `close` itself waits 5 s at most (a shutdown must not hang); on a busy disk the write-backs of a
    test's 30 MB take longer, and an assertion on the cache made before they finish fails for no defect."""
    assert cache.close(timeout=120), "the page-cache thread did not finish its queue in 120 s"


def read_ahead_arrives(fd: int, offsets: tuple[int, ...], length: int = 4096,
                       what: str = "the disk never read ahead") -> None:
    """Wait (at most 10 s) until every [offset, offset + length) is cached. A read-ahead is only started by
    `POSIX_FADV_WILLNEED`; the disk finishes it later, and `mincore` counts a page only once its read is done,
    so on a busy disk an assertion made at once fails although the read-ahead was asked for."""
    deadline = time.monotonic() + 10
    while not all(cached(fd, offset, length) for offset in offsets):
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def drops_pages(directory: Path) -> bool:
    """Does this filesystem let fsynced pages go when told to (not tmpfs)?"""
    path = directory / "probe"
    with open(path, "wb+", buffering=0) as file:
        file.write(os.urandom(4 * MIB))
        os.fsync(file.fileno())
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        dropped = not cached(file.fileno(), 0)
    path.unlink()
    return dropped


class Handle:
    """A segment as the budget sees it."""

    def __init__(self, file: IO[bytes] | None) -> None:
        self.file = file
        self.cache_dropped_to = 0
        self.cache_counted_to = 0

    def open_file(self) -> IO[bytes] | None:
        return self.file


@pytest.fixture
def file(tmp_path: Path) -> Iterator[IO[bytes]]:
    if not drops_pages(tmp_path):
        pytest.skip("this filesystem keeps its pages (tmpfs): nothing can be dropped")
    with open(tmp_path / "segment.log", "wb+", buffering=0) as handle:
        yield handle


def write_synced(file: IO[bytes], size: int) -> int:
    """Append `size` bytes and fsync them; returns the file's new size."""
    file.write(os.urandom(size))
    os.fdatasync(file.fileno())
    return os.fstat(file.fileno()).st_size


# -- counting ----------------------------------------------------------------------------------------
def test_no_budget_counts_and_drops_nothing() -> None:
    cache = PageCache(-1)
    segment = Handle(None)
    cache.fsynced(segment, 100 * MIB)  # type: ignore[arg-type]
    assert not cache.enabled and cache.cached_bytes == 0 and segment.cache_dropped_to == 0


def test_ranges_that_continue_each_other_are_one_and_the_oldest_go_first() -> None:
    cache = PageCache(8 * MIB)
    first, second = Handle(None), Handle(None)
    for start in range(0, 6 * MIB, MIB):
        cache.fsynced(first, start + MIB)  # type: ignore[arg-type]
    cache.fsynced(second, 4 * MIB)  # type: ignore[arg-type]
    assert cache.cached_bytes == 8 * MIB + 2 * MIB - DROP_ALIGN  # 2 MiB over: one aligned step of the oldest
    assert first.cache_dropped_to == DROP_ALIGN and second.cache_dropped_to == 0
    cache.fsynced(second, 20 * MIB)  # type: ignore[arg-type]
    assert first.cache_dropped_to == 6 * MIB  # wholly gone, then the second's oldest
    assert second.cache_dropped_to % DROP_ALIGN == 0 and second.cache_dropped_to > 0
    assert cache.cached_bytes <= 8 * MIB


def test_a_drop_never_ends_inside_a_large_folio() -> None:
    """Drops end on `DROP_ALIGN` boundaries (or at a range's end): a folio split between two drops would
    be skipped by both and stay cached for good."""
    cache = PageCache(4 * MIB)
    segment = Handle(None)
    ends = []
    for start in range(0, 64 * MIB, 300_000):
        cache.fsynced(segment, start + 300_000)  # type: ignore[arg-type]
        ends.append(segment.cache_dropped_to)
    assert all(end % DROP_ALIGN == 0 for end in ends) and ends[-1] >= 56 * MIB


def test_tiny_ranges_over_many_segments_cannot_grow_the_bookkeeping_without_bound() -> None:
    """The attack: acks=all batches of a few bytes spread over many partitions, one fsynced range each
    (they never continue one another). The count stays at `MAX_RANGES`; the oldest go early."""
    cache = PageCache(1 << 40)
    segments = [Handle(None) for _ in range(64)]
    offsets = [0] * 64
    for i in range(MAX_RANGES + 5_000):
        k = i % 64
        cache.fsynced(segments[k], offsets[k] + 100)  # type: ignore[arg-type]
        offsets[k] += 100
    assert cache.ranges_held == MAX_RANGES
    assert cache.cached_bytes == MAX_RANGES * 100
    assert all(segment.cache_dropped_to > 0 for segment in segments)  # the oldest of each went


# -- real pages ----------------------------------------------------------------------------------------
def test_the_oldest_fsynced_data_leaves_the_cache_and_the_newest_stays(file: IO[bytes]) -> None:
    cache = PageCache(8 * MIB)
    segment = Handle(file)
    for _ in range(12):
        cache.fsynced(segment, write_synced(file, 2 * MIB))  # type: ignore[arg-type]
    finish(cache)  # the drops are done
    fd = file.fileno()
    assert segment.cache_dropped_to >= 14 * MIB
    assert not any(cached(fd, offset) for offset in range(0, segment.cache_dropped_to, MIB))
    assert all(cached(fd, offset) for offset in range(segment.cache_dropped_to, 24 * MIB, MIB))
    assert cache.dropped_bytes == segment.cache_dropped_to


def test_a_sent_region_of_dropped_data_is_dropped_again_and_the_disk_reads_ahead(file: IO[bytes]) -> None:
    cache = PageCache(0)
    end = write_synced(file, 40 * MIB)
    os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    assert not cached(file.fileno(), 0)
    os.pread(file.fileno(), MIB, 0)  # a read from the disk brings it back
    assert cached(file.fileno(), 0)
    cache.sent(file, 0, MIB)
    cache.read_ahead(file, MIB, min(MIB + READ_AHEAD, end))
    finish(cache)
    assert not cached(file.fileno(), 0)
    read_ahead_arrives(file.fileno(), (MIB, MIB + READ_AHEAD - 4096))


def test_a_read_ahead_longer_than_the_kernel_reads_at_once_is_read_whole(file: IO[bytes]) -> None:
    """Linux reads at most max(read_ahead_kb, max_sectors_kb) for one WILLNEED and skips the rest without
    an error: READ_AHEAD is asked for in pieces, so all of it is read however small the device's limits."""
    end = write_synced(file, 4 * MIB + 2 * READ_AHEAD)
    os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    assert not cached(file.fileno(), 0, end)
    cache = PageCache(0)
    cache.read_ahead(file, MIB, MIB + READ_AHEAD)
    finish(cache)
    read_ahead_arrives(file.fileno(), (MIB,), READ_AHEAD, "part of the read-ahead was never read")
    assert not cached(file.fileno(), MIB + READ_AHEAD + 2 * MIB, MIB)  # and nothing far past it


@pytest.mark.parametrize(("layout", "piece"), [
    ({"8:0/queue/read_ahead_kb": "128", "8:0/queue/max_sectors_kb": "1280"}, 1280 << 10),
    ({"8:0/queue/read_ahead_kb": "8192", "8:0/queue/max_sectors_kb": "4096"}, 8 << 20),
    ({"8:0/queue/read_ahead_kb": "0", "8:0/queue/max_sectors_kb": "64"}, READ_AHEAD_PIECE),  # at least
    ({"disk/queue/read_ahead_kb": "512", "disk/queue/max_sectors_kb": "256", "disk/8:0/x": ""}, 512 << 10),
    ({"8:0/queue/read_ahead_kb": "garbage", "8:0/queue/max_sectors_kb": "128"}, READ_AHEAD_PIECE),
    ({}, READ_AHEAD_PIECE),  # no block device in sysfs (tmpfs, overlay, btrfs's own numbers)
])
def test_the_read_ahead_piece_is_what_the_device_reads_for_one_willneed(tmp_path: Path, layout: dict[str, str],
                                                                       piece: int) -> None:
    for name, text in layout.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    if (tmp_path / "disk" / "8:0").exists():  # a partition: its directory sits in its disk's
        (tmp_path / "8:0").symlink_to(tmp_path / "disk" / "8:0")
    assert read_ahead_piece(os.makedev(8, 0), tmp_path) == piece


def test_a_closed_file_is_passed_over(file: IO[bytes], tmp_path: Path) -> None:
    cache = PageCache(0)
    with open(tmp_path / "gone.log", "wb+", buffering=0) as gone:
        gone.write(b"x" * MIB)
    cache.sent(gone, 0, MIB)  # closed before the thread got to it: no error, nothing counted
    finish(cache)
    assert cache.dropped_bytes == 0


# -- through a log -------------------------------------------------------------------------------------
def test_a_log_drops_what_passed_the_budget_and_reads_of_it_are_dropped_after_sending(tmp_path: Path) -> None:
    if not drops_pages(tmp_path):
        pytest.skip("this filesystem keeps its pages (tmpfs): nothing can be dropped")
    cache = PageCache(4 * MIB)
    log = Log(tmp_path / "t-0", "t", 0, TOPIC_ID, config(segment_bytes=16 * MIB), page_cache=cache)
    try:  # closed even when an assertion fails, or its files are the next test's unraisable warning
        _drops_what_passed_the_budget(log, cache)
    finally:
        log.close()


def _drops_what_passed_the_budget(log: Log, cache: PageCache) -> None:
    value = os.urandom(100_000)
    for _ in range(300):  # ~30 MB over two segments, fsynced as it goes
        append(log, batch(1, value=value))
        log.flush()
    finish(cache)
    first = log.segments[0]
    assert first.cache_dropped_to > 0
    assert not cached(first.file.fileno(), 0)
    last = log.segments[-1]
    assert cached(last.file.fileno(), last.size - 4096)  # the newest stay
    log.page_cache = reader = PageCache(4 * MIB)  # a fresh one, to see its drops done
    region = log.read(0, MIB).region  # a consumer far behind: from the disk
    assert region is not None
    fd = region.file.fileno()
    assert len(region.read_bytes()) == region.length  # pread, as the TLS writer does
    assert cached(fd, 0)
    region.sent()
    finish(reader)
    assert not cached(fd, 0)  # dropped again once sent
    read_ahead_arrives(fd, (region.length,))  # and the disk reads on ahead of the consumer


def test_data_nobody_fsyncs_leaves_the_cache_too_and_stays_not_durable(tmp_path: Path) -> None:
    """acks=1 with Kafka's flush policy: nothing fsyncs, yet the oldest appends leave the cache once they
    pass the budget (their write-back is started, then they are dropped), and the recovery point stays."""
    if not drops_pages(tmp_path):
        pytest.skip("this filesystem keeps its pages (tmpfs): nothing can be dropped")
    cache = PageCache(4 * MIB)
    log = Log(tmp_path / "t-0", "t", 0, TOPIC_ID, config(segment_bytes=64 * MIB), page_cache=cache)
    try:
        _nobody_fsyncs(log, cache)
    finally:
        cache.close()
        log.close()


def _nobody_fsyncs(log: Log, cache: PageCache) -> None:
    values = [os.urandom(100_000) for _ in range(300)]  # ~30 MB, never fsynced
    for value in values:
        append(log, batch(1, value=value))
        log.recycle_unflushed()  # as the partition does for acks 0 and 1
    segment = log.segments[-1]
    finish(cache)  # every write-back started and every drop made
    assert segment.cache_dropped_to > 0 and segment.size - segment.cache_counted_to < WRITE_BACK_STEP
    dropped = range(0, segment.cache_dropped_to, MIB)
    left = [offset for offset in dropped if cached(segment.file.fileno(), offset)]
    assert not left, f"the oldest appends stayed in the cache: {left}"  # written back before their drop
    assert cache.cached_bytes <= 4 * MIB + DROP_ALIGN
    assert cached(segment.file.fileno(), segment.size - 4096)  # the newest stay
    assert log.recovery_point == 0  # counted for the cache, never claimed durable
    region = log.read(0, 200 * MIB).region
    assert region is not None
    raw = region.read_bytes()
    got = [record.value for position, header in iter_batches(raw) for record in decode_records(raw, position, header)]
    assert got == [value + b"0" for value in values]


def test_a_budget_keeps_every_record_readable(tmp_path: Path) -> None:
    """Dropping pages never changes what is read: everything appended reads back the same."""
    cache = PageCache(0)  # drop everything fsynced
    log = Log(tmp_path / "t-0", "t", 0, TOPIC_ID, config(segment_bytes=4 * MIB), page_cache=cache)
    values = [os.urandom(50_000) for _ in range(200)]
    for value in values:
        append(log, batch(1, value=value))
        log.flush()
    got = []
    offset = 0
    while offset < log.log_end_offset:
        region = log.read(offset, MIB).region
        assert region is not None
        raw = region.read_bytes()
        region.sent()
        for position, header in iter_batches(raw):
            got.extend(record.value for record in decode_records(raw, position, header))
            offset = header.last_offset + 1
    cache.close()
    log.close()
    assert got == [value + b"0" for value in values]  # (the helper numbers each record's value)


class RecordingCache(PageCache):
    """A budget that notes the read-aheads it is asked for."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self.asked: list[tuple[int, int]] = []

    def read_ahead(self, file: IO[bytes], start: int, end: int) -> None:
        self.asked.append((start, end))
        super().read_ahead(file, start, end)


def test_a_fetch_of_tiny_regions_cannot_make_the_disk_read_much_more_than_it_sends(tmp_path: Path) -> None:
    """The attack: a fetch naming many partitions far behind, each for a tiny amount (one small batch),
    to make the broker read ahead 16 MiB for each. The read-ahead is at most `READ_AHEAD_FACTOR` regions."""
    cache = RecordingCache(0)
    log = Log(tmp_path / "t-0", "t", 0, TOPIC_ID, config(), page_cache=cache)
    for _ in range(2_000):
        append(log, batch(1, value=b"x" * 100))
    log.flush()
    for offset in range(0, 2_000, 100):
        region = log.read(offset, 1, min_one_batch=True).region
        assert region is not None
        start, end = cache.asked[-1]
        assert start == region.position + region.length
        assert 0 < end - start <= READ_AHEAD_FACTOR * region.length
    big = log.read(0, 8 << 20).region
    assert big is not None and cache.asked[-1][1] - cache.asked[-1][0] <= READ_AHEAD
    cache.close()
    log.close()


class DropLog(PageCache):
    """A budget that notes the drops it hands its thread (and hands none: no real files here)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self.drops: list[tuple[object, int, int]] = []
        self.write_backs: list[tuple[object, int, int]] = []

    def _queue(self, advice: int, file: IO[bytes], start: int, end: int, segment: Droppable | None) -> None:
        if segment is None:
            self.drops.append((file, start, end))
            return
        self.write_backs.append((file, start, end))
        self._count(segment, start, end)  # as the thread does once the write-back has started


@settings(max_examples=200, deadline=None)
@given(budget=st.integers(0, 64 * MIB),
       writes=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6 * MIB)), min_size=1, max_size=80))
def test_the_budget_drops_only_fsynced_bytes_oldest_first_and_keeps_to_its_size(
        budget: int, writes: list[tuple[int, int]]) -> None:
    cache = DropLog(budget)
    segments = [Handle(cast(IO[bytes], object())) for _ in range(4)]
    ends = [0] * 4
    dropped = [0] * 4  # per segment: drops are contiguous from 0 (oldest first) and never overlap
    for index, size in writes:
        cache.fsynced(segments[index], ends[index] + size)  # type: ignore[arg-type]
        ends[index] += size
        assert cache.cached_bytes <= budget + DROP_ALIGN  # at most one aligned step left over
        for file, start, end in cache.drops:
            k = next(i for i, segment in enumerate(segments) if segment.file is file)
            assert start == dropped[k] and start < end <= ends[k]  # the next oldest, fsynced bytes only
            dropped[k] = end
        cache.drops.clear()
        assert all(segment.cache_dropped_to == dropped[i] for i, segment in enumerate(segments))
    assert cache.cached_bytes == sum(ends) - sum(dropped)  # every byte is counted or dropped, once


@settings(max_examples=200, deadline=None)
@given(budget=st.integers(0, 16 * MIB),
       steps=st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.integers(1, 3 * MIB)), min_size=1, max_size=80))
def test_data_nobody_fsyncs_is_written_back_counted_and_dropped_in_turn(
        budget: int, steps: list[tuple[bool, int, int]]) -> None:
    """acks=1 appends (`written`) mixed with fsyncs: bytes are counted once each, whichever comes first; a
    drop takes only bytes fsynced or handed to write-back before; nothing uncounted passes one step."""
    cache = DropLog(budget)
    segments = [Handle(cast(IO[bytes], object())) for _ in range(4)]
    ends, synced, handed, dropped = [0] * 4, [0] * 4, [0] * 4, [0] * 4
    for fsync, index, size in steps:
        ends[index] += size
        cache.written(segments[index], ends[index])  # type: ignore[arg-type]
        for file, start, end in cache.write_backs:
            k = next(i for i, segment in enumerate(segments) if segment.file is file)
            assert start == max(handed[k], synced[k]) and end == ends[k]  # contiguous, never twice
            handed[k] = end
        cache.write_backs.clear()
        if fsync:
            cache.fsynced(segments[index], ends[index])  # type: ignore[arg-type]
            synced[index] = ends[index]
        for file, start, end in cache.drops:
            k = next(i for i, segment in enumerate(segments) if segment.file is file)
            assert start == dropped[k] and end <= max(synced[k], handed[k])  # on the disk or on its way
            dropped[k] = end
        cache.drops.clear()
        assert cache.cached_bytes <= budget + DROP_ALIGN
        assert all(ends[i] - segment.cache_counted_to < WRITE_BACK_STEP for i, segment in enumerate(segments))
    counted = [segment.cache_counted_to for segment in segments]
    assert counted == [max(synced[i], handed[i]) for i in range(4)]
    assert cache.cached_bytes == sum(counted) - sum(dropped)  # every counted byte is cached or dropped, once
