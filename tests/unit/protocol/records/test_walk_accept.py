"""The walk's copy-free fast path (`_walk_accept`, C) accepts exactly what the walk accepts, with the same
summary, on valid, mutated and random record bytes, and in any buffer (bytes, bytearray, a memoryview
slice); whatever it refuses is left to the walk, so produce's verdicts and messages are unchanged."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.compiled_modules import load_pure_walk
from pybroker.protocol.records import records_check
from pybroker.protocol.records.batch import parse_header
from pybroker.protocol.records.record import Record, build_batch, encode_record
from pybroker.protocol.records.varint import write_varint

PURE = load_pure_walk()
try:
    from pybroker.protocol.records import _walk_accept
except ImportError:  # a pure-Python install (PYBROKER_PURE_PYTHON=1, or no compiler)
    _walk_accept = None  # type: ignore[assignment]

built = pytest.mark.skipif(_walk_accept is None, reason="the C fast path is not built in this install")


def _walk(body: bytes, count: int, lod: int, consecutive: bool) -> tuple[int, int, int] | None:
    try:
        summary = PURE.walk(body, 0, len(body), count, lod, consecutive)
    except ValueError:
        return None
    return summary.min_timestamp_delta, summary.max_timestamp_delta, summary.first_keyless


def _same(body: bytes | bytearray, count: int, lod: int, consecutive: bool) -> None:
    expected = _walk(bytes(body), count, lod, consecutive)
    assert _walk_accept.accept(body, 0, len(body), count, lod, consecutive) == expected
    padded = b"\xff" * 7 + bytes(body) + b"\x00" * 5  # the records in the middle of a bigger buffer
    with memoryview(bytearray(padded)) as view:
        assert _walk_accept.accept(view, 7, 7 + len(body), count, lod, consecutive) == expected


def test_installed_where_it_can_be() -> None:
    if os.environ.get("PYBROKER_PURE_PYTHON", "") in ("", "0"):
        assert _walk_accept is not None
        assert "_walk_accept" in records_check.WALK_IMPLEMENTATION


records = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.one_of(st.none(), st.binary(max_size=20)),
                             st.integers(-(2**63), 2**63 - 1),
                             st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=3)), max_size=2)),
                   max_size=6)


@built
@settings(max_examples=600, deadline=None)
@given(records, st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), max_size=3), st.integers(-1, 8),
       st.booleans(), st.integers(-2, 2))
def test_same_verdict_as_the_walk(rows: list, edits: list[tuple[int, int]], count_shift: int, consecutive: bool,
                                  lod_shift: int) -> None:
    body = bytearray()
    for i, (key, value, ts, headers) in enumerate(rows):
        encode_record(body, Record(i if consecutive else 2 * i, ts, key, value, headers))
    for position, byte in edits:
        if body:
            body[position % len(body)] = byte
    count = max(len(rows) + count_shift - 1, 0) if count_shift >= 0 else len(rows)
    lod = (count - 1 if consecutive else 2 * (count - 1)) + lod_shift
    _same(body, count, lod, consecutive)


@built
def test_random_bytes_and_edge_varints() -> None:
    rng = random.Random(20261124)
    for _ in range(3000):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
        _same(body, rng.randrange(0, 4), rng.randrange(-1, 4), rng.random() < 0.5)
    # varints at and past their widths: 5 bytes for 32 bits, 10 for 64, and values just too wide
    for ts in (2**63 - 1, -(2**63), 2**62, 0):
        body = bytearray()
        encode_record(body, Record(0, ts, b"k", b"v", []))
        _same(body, 1, 0, True)
    too_wide = bytearray([0x0C, 0]) + b"\xff" * 9 + b"\x02" + b"\x00\x02k\x02v\x00"  # 10th byte carries bit 64
    _same(too_wide, 1, 0, True)
    for length in ([0xFF, 0xFF, 0xFF, 0xFF, 0x0F], [0xFF, 0xFF, 0xFF, 0xFF, 0x1F], [0x80] * 5 + [0x00]):
        _same(bytes(length) + b"\x00" * 8, 1, 0, True)


@built
def test_header_keys_must_be_utf8_on_the_produce_path_only() -> None:
    for key in (b"\xc3\xa9t\xc3\xa9", b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\xaf", b"ascii"):
        body = bytearray([0, 0, 0])  # attributes, timestamp delta, offset delta
        write_varint(body, -1)  # no key
        write_varint(body, 1)
        body += b"v"
        write_varint(body, 1)  # one header
        write_varint(body, len(key))
        body += key
        write_varint(body, -1)
        record = bytearray()
        write_varint(record, len(body))
        record += body
        for consecutive in (True, False):
            _same(record, 1, 0, consecutive)


@built
def test_what_build_batch_writes_is_accepted_in_a_bytearray_frame() -> None:
    raw = bytearray(build_batch([Record(i, i * 3, b"k%d" % i if i % 4 else None, b"v" * i, [("h", b"x")])
                                 for i in range(200)], base_timestamp=1_700_000_000_000))
    header = parse_header(raw)
    summary = records_check.walk_batch(raw, 0, header, consecutive=True)
    assert (summary.count, summary.min_timestamp_delta, summary.max_timestamp_delta, summary.first_keyless) == (
        200, 0, 597, 0)


@built
def test_uninitialized_bytearray() -> None:
    frame = _walk_accept.uninitialized_bytearray(1 << 20)
    assert type(frame) is bytearray and len(frame) == 1 << 20
    assert len(_walk_accept.uninitialized_bytearray(0)) == 0
    with pytest.raises(ValueError):
        _walk_accept.uninitialized_bytearray(-1)
    with pytest.raises(TypeError):
        _walk_accept.uninitialized_bytearray("1")
