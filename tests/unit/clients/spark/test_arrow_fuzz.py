"""Hostile bytes into the decoder: a ValueError with nothing appended, never a crash, never a different verdict.

The C builder reads lengths and varints from whatever it is given; these properties feed it random
bytes and mutations of valid record bytes (hypothesis), and check that it agrees with the pure-Python
twin on every input: the same rows when both accept, a ValueError from both otherwise, and a builder
that is left as it was before the bad batch.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.protocol.records.record import Record, build_batch
from tests.unit.clients.spark.arrow_kit import BUILDERS

HEADER = 61


def _outcome(cls: Any, data: bytes, args: tuple[int, ...], headers: bool) -> tuple[str, Any]:
    builder = cls(headers)
    builder.add_batch(VALID, HEADER, len(VALID), 3, 0, 2, 0, 0, 0, 0, 2**62)  # something in it already
    try:
        added = builder.add_batch(data, *args)
    except ValueError:
        assert builder.rows == 3  # rolled back: only the first batch's rows
        return "refused", builder.finish()
    assert builder.rows == 3 + added
    return "read", builder.finish()


VALID = build_batch([Record(i, i, b"k", b"v" * i, [("h", b"x")]) for i in range(3)], base_timestamp=1)


def _check(data: bytes, args: tuple[int, ...], headers: bool) -> None:
    outcomes = {name: _outcome(cls, data, args, headers) for name, cls in BUILDERS.items()}
    assert len({repr(o) for o in outcomes.values()}) == 1, outcomes


params = st.tuples(
    st.integers(-2, 40),                       # records_count
    st.integers(-1, 2**40),                    # base_offset
    st.integers(-2, 60),                       # last_offset_delta
    st.integers(-(2**63), 2**63 - 1),          # base_timestamp
    st.integers(-(2**63), 2**63 - 1),          # max_timestamp
    st.integers(0, 1),                         # timestamp type
    st.integers(0, 30),                        # low (relative to base_offset)
    st.integers(0, 60),                        # high (relative to base_offset)
)


def _args(data: bytes, start: int, end: int, p: tuple[int, ...]) -> tuple[int, ...]:
    count, base, last_delta, base_ts, max_ts, ts_type, low, high = p
    return (start, end, count, base, last_delta, base_ts, max_ts, ts_type, max(base, 0) + low, max(base, 0) + high)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), p=params, headers=st.booleans())
def test_random_bytes(data: bytes, p: tuple[int, ...], headers: bool) -> None:
    _check(data, _args(data, 0, len(data), p), headers)


records = st.lists(st.builds(
    Record, offset_delta=st.just(0), timestamp_delta=st.integers(-(2**62), 2**62),
    key=st.none() | st.binary(max_size=20), value=st.none() | st.binary(max_size=40),
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3),
), min_size=1, max_size=8)
mutation = st.tuples(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]), st.integers(0, 10_000),
                     st.integers(0, 255))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=records, mutations=st.lists(mutation, min_size=1, max_size=4), p=params, headers=st.booleans(),
       keep_count=st.booleans())
def test_mutated_valid_batches(recs: list[Record], mutations: list[tuple[str, int, int]], p: tuple[int, ...],
                               headers: bool, keep_count: bool) -> None:
    for i, r in enumerate(recs):
        r.offset_delta = i
    body = bytearray(build_batch(recs, base_timestamp=0)[HEADER:])
    for kind, where, byte in mutations:
        at = where % (len(body) + 1)
        if kind == "flip" and body:
            body[at % len(body)] ^= 1 << (byte % 8)
        elif kind == "set" and body:
            body[at % len(body)] = byte
        elif kind == "insert":
            body[at:at] = bytes([byte])
        elif kind == "delete" and body:
            del body[at % len(body)]
        elif kind == "truncate":
            del body[at:]
    args = list(_args(bytes(body), 0, len(body), p))
    if keep_count:  # the header's own figures, so the records themselves are what is wrong
        args[2], args[4] = len(recs), len(recs) - 1
    _check(bytes(body), tuple(args), headers)


@pytest.mark.parametrize("start,end", [(-1, 5), (0, 10**6), (8, 4), (2**40, 2**41)])
def test_a_window_outside_the_buffer_is_refused(start: int, end: int) -> None:
    for cls in BUILDERS.values():
        with pytest.raises(ValueError, match="outside the buffer"):
            cls(True).add_batch(VALID, start, end, 3, 0, 2, 0, 0, 0, 0, 100)


def test_parameters_that_cannot_be_are_refused() -> None:
    for cls in BUILDERS.values():
        for args in ((-1, 0, 2, 0, 0, 0), (3, -5, 2, 0, 0, 0), (3, 0, 2**31, 0, 0, 0), (3, 0, 2, 0, 0, 2),
                     (3, 2**63 - 10, 2, 0, 0, 0)):
            count, base, last, base_ts, max_ts, ts_type = args
            with pytest.raises(ValueError):
                cls(True).add_batch(VALID, HEADER, len(VALID), count, base, last, base_ts, max_ts, ts_type, 0, 2**62)
