"""A property test of the log: random appends and rolls, reads anywhere, the same after reopening."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.storage.log import Log
from tests.unit.storage.helpers import NOW, append, batch, open_log, read_spans

appends = st.lists(st.tuples(st.integers(1, 6), st.integers(0, 120)), min_size=1, max_size=40)


def _check_reads(log: Log, bounds: list[tuple[int, int]], probes: list[int], max_bytes: int) -> None:
    end = log.log_end_offset
    for probe in probes:
        offset = probe % (end + 1)
        spans = read_spans(log, offset, max_bytes)
        if offset == end:
            assert spans == []
            continue
        containing = next(b for b in bounds if b[0] <= offset <= b[1])
        assert spans[0] == containing  # whole batches, starting with the one holding the offset
        assert spans == bounds[bounds.index(containing) : bounds.index(containing) + len(spans)]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=appends, segment_bytes=st.integers(200, 3000), interval=st.integers(1, 400),
       probes=st.lists(st.integers(0, 10_000), max_size=20), max_bytes=st.integers(1, 2000),
       clean=st.booleans())
def test_reads_return_the_batch_holding_the_offset_before_and_after_reopen(
        tmp_path_factory: pytest.TempPathFactory, batches: list[tuple[int, int]], segment_bytes: int,
        interval: int, probes: list[int], max_bytes: int, clean: bool) -> None:
    path = tmp_path_factory.mktemp("prop") / "t-0"
    settings_ = {"segment_bytes": segment_bytes, "index_interval_bytes": interval}
    log = open_log(path, **settings_)
    try:
        bounds = []
        for count, value_size in batches:
            result = append(log, batch(count, value=b"x" * value_size, ts=NOW + len(bounds)))
            bounds.append((result.base_offset, result.last_offset))
        end = log.log_end_offset
        assert end == sum(count for count, _ in batches)
        segments = log.segments
        assert all(a.next_offset == b.base_offset for a, b in pairwise(segments))
        _check_reads(log, bounds, probes, max_bytes)
    finally:
        log.close()
    log = open_log(path, clean=clean, **settings_)
    try:
        assert log.log_end_offset == end and log.load_stats.bytes_truncated == 0
        _check_reads(log, bounds, probes, max_bytes)
        assert log.offset_for_timestamp(NOW + len(bounds) - 1) is not None
        assert append(log, batch(1)).base_offset == end
    finally:
        log.close()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=appends, cut=st.integers(0, 10_000), garbage=st.binary(max_size=200))
def test_recovery_keeps_exactly_the_whole_batches_before_a_torn_write(
        tmp_path_factory: pytest.TempPathFactory, batches: list[tuple[int, int]], cut: int,
        garbage: bytes) -> None:
    path = tmp_path_factory.mktemp("torn") / "t-0"
    log = open_log(path, segment_bytes=1 << 20, index_interval_bytes=64)
    ends = []  # (file position after the batch, log end after the batch)
    try:
        for count, value_size in batches:
            append(log, batch(count, value=b"y" * value_size))
            ends.append((log.active_segment.size, log.log_end_offset))
    finally:
        log.close()
    segment = path / "00000000000000000000.log"
    size = segment.stat().st_size
    keep = cut % (size + 1)
    with open(segment, "r+b") as handle:
        handle.truncate(keep)
        handle.seek(keep)
        handle.write(garbage)
    expected_end = max([end for position, end in ends if position <= keep], default=0)
    log = open_log(path, clean=False, segment_bytes=1 << 20, index_interval_bytes=64)
    try:
        assert log.log_end_offset == expected_end
        if expected_end:
            spans = read_spans(log, expected_end - 1)
            assert spans and spans[-1][1] == expected_end - 1
        assert append(log, batch(1)).base_offset == expected_end
    finally:
        log.close()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=appends, noise=st.binary(min_size=1, max_size=120), at=st.integers(0, 10_000),
       probes=st.lists(st.integers(0, 10_000), min_size=1, max_size=10))
def test_a_damaged_index_never_misdirects_a_read(tmp_path_factory: pytest.TempPathFactory,
                                                 batches: list[tuple[int, int]], noise: bytes, at: int,
                                                 probes: list[int]) -> None:
    path = tmp_path_factory.mktemp("index") / "t-0"
    log = open_log(path, segment_bytes=1 << 20, index_interval_bytes=32)
    bounds = []
    try:
        for count, value_size in batches:
            result = append(log, batch(count, value=b"z" * value_size))
            bounds.append((result.base_offset, result.last_offset))
    finally:
        log.close()
    index = path / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    position = at % (len(data) + 1)
    data[position : position + len(noise)] = noise
    index.write_bytes(bytes(data))
    log = open_log(path, clean=True, segment_bytes=1 << 20, index_interval_bytes=32)
    try:
        _check_reads(log, bounds, probes, 1 << 20)
    finally:
        log.close()
