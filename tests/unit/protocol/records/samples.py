"""Shared sample data for the record-batch tests: the same three records every oracle builds."""

from __future__ import annotations

from pybroker.protocol.records.record import Record

CODECS = (0, 1, 2, 3, 4)
BASE_TIMESTAMP = 1_700_000_000_000

#: (key, value, headers): a keyed record with a header, a keyless one, a null value with null/empty headers
ROWS: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"k1", b"v1" * 40, [("h", b"x")]),
    (None, b"v2" * 40, []),
    (b"k3", None, [("a", None), ("b", b"")]),
]


def sample_records() -> list[Record]:
    return [Record(i, i, key, value, list(headers)) for i, (key, value, headers) in enumerate(ROWS)]


def rows_of(records: list[Record]) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [(r.key, r.value, list(r.headers)) for r in records]
