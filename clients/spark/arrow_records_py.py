"""The pure-Python twin of `_arrow_records.c`: the same `ColumnBuilder`, for installs without the extension.

`PYBROKER_PURE_PYTHON=1` at install (or a machine without a C compiler) leaves the C extension unbuilt;
the connector then runs this one. It decodes with pybroker's own record codec (`decode_body`) and
writes the same buffers the C builder writes (Arrow's layout, native byte order), so `arrow_records`
wraps either without knowing which it has; the tests feed both the same bytes and compare.

Slower (a Python object per record while decoding) but never different: the same checks (exact record
count, fields filling each record, offset deltas growing up to `last_offset_delta`), the same
ValueError on bad bytes with nothing appended, header keys decoded as Java does (invalid UTF-8 becomes
U+FFFD).
"""

from __future__ import annotations

from array import array
from typing import Any

from pybroker.protocol.records.batch import RecordsError
from pybroker.protocol.records.record import Record, decode_body

_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: a record's timestamp in ms must fit Spark's microseconds in 64 bits
_MS_LIMIT = _INT64_MAX // 1000

Column = tuple[bytes | None, int, bytes, bytes]


class _Bits:
    """A validity bitmap (Arrow's order: bit i of byte i // 8, least significant first)."""

    def __init__(self) -> None:
        self.bits = bytearray()
        self.n = 0
        self.nulls = 0

    def append(self, valid: bool) -> None:
        if self.n % 8 == 0:
            self.bits.append(0)
        if valid:
            self.bits[-1] |= 1 << (self.n % 8)
        else:
            self.nulls += 1
        self.n += 1

    def take(self) -> bytes | None:
        out = bytes(self.bits) if self.nulls else None
        self.__init__()  # type: ignore[misc]
        return out


class _Binary:
    """A binary (or string) column: validity, int32 offsets, data."""

    def __init__(self) -> None:
        self.valid = _Bits()
        self.offsets = array("i", [0])
        self.data = bytearray()

    def append(self, blob: bytes | None) -> None:
        if blob is not None:
            self.data += blob
            if len(self.data) > _INT32_MAX:
                raise ValueError("more than 2 GiB of keys, values or headers in one batch")
        self.offsets.append(len(self.data))
        self.valid.append(blob is not None)

    def take(self) -> Column:
        nulls = self.valid.nulls
        out = (self.valid.take(), nulls, self.offsets.tobytes(), bytes(self.data))
        self.__init__()  # type: ignore[misc]
        return out


def _header_key(key: str) -> bytes:
    """`decode_body` keeps a header key's exact bytes (surrogateescape); Spark shows it as Java decodes it."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode("utf-8")


class ColumnBuilder:
    """Arrow column buffers of Spark's Kafka schema, batch by batch (see `_arrow_records.c` for the contract)."""

    def __init__(self, headers: bool) -> None:
        self.headers = bool(headers)
        self._start()

    def _start(self) -> None:
        self.rows = 0
        self._offsets = array("q")
        self._timestamps = array("q")
        self._types = array("i")
        self._key = _Binary()
        self._value = _Binary()
        self._lists = _Bits()
        self._list_offsets = array("i", [0])
        self._header_key = _Binary()
        self._header_value = _Binary()

    @property
    def size(self) -> int:
        return (len(self._key.data) + len(self._value.data) + len(self._header_key.data)
                + len(self._header_value.data) + self.rows * 20)

    def add_batch(self, data: Any, start: int, end: int, records_count: int, base_offset: int,
                  last_offset_delta: int, base_timestamp: int, max_timestamp: int, timestamp_type: int,
                  low: int, high: int) -> int:
        if start < 0 or end > len(data) or start > end:
            raise ValueError("record bytes outside the buffer")
        if records_count < 0:
            raise ValueError(f"records_count {records_count} is negative")
        if timestamp_type not in (0, 1):
            raise ValueError(f"timestamp type {timestamp_type} is neither 0 nor 1")
        if not -1 <= last_offset_delta <= _INT32_MAX or not 0 <= base_offset <= _INT64_MAX - _INT32_MAX:
            raise ValueError(f"base offset {base_offset} with last offset delta {last_offset_delta} is impossible")
        try:
            records = decode_body(bytes(data[start:end]), records_count)
        except RecordsError as exc:
            raise ValueError(exc.message) from None
        kept = self._check(records, base_offset, last_offset_delta, base_timestamp, max_timestamp,
                           timestamp_type, low, high)
        for record, offset, timestamp in kept:  # checked above: appending cannot fail half-way
            self._append(record, offset, timestamp, timestamp_type)
        return len(kept)

    @staticmethod
    def _check(records: list[Record], base_offset: int, last_offset_delta: int, base_timestamp: int,
               max_timestamp: int, timestamp_type: int, low: int, high: int) -> list[tuple[Record, int, int]]:
        kept = []
        previous = -1
        for index, record in enumerate(records):
            delta = record.offset_delta
            if delta <= previous or delta > last_offset_delta:
                raise ValueError(f"record {index} has offset delta {delta}, after {previous} "
                                 f"and at most {last_offset_delta}")
            previous = delta
            offset = base_offset + delta
            if not low <= offset < high:
                continue
            timestamp = max_timestamp if timestamp_type else base_timestamp + record.timestamp_delta
            if not _INT64_MIN <= timestamp <= _INT64_MAX:
                raise ValueError(f"record {index} timestamp: base {base_timestamp} + delta "
                                 f"{record.timestamp_delta} overflows")
            if not -_MS_LIMIT - 1 < timestamp <= _MS_LIMIT:
                raise ValueError(f"record {index} timestamp {timestamp} ms is outside Spark's timestamp range")
            kept.append((record, offset, timestamp))
        return kept

    def _append(self, record: Record, offset: int, timestamp: int, timestamp_type: int) -> None:
        self._offsets.append(offset)
        self._timestamps.append(timestamp * 1000)
        self._types.append(timestamp_type)
        self._key.append(record.key)
        self._value.append(record.value)
        if self.headers:
            for key, value in record.headers:
                self._header_key.append(_header_key(key))
                self._header_value.append(value)
            self._list_offsets.append(len(self._header_key.offsets) - 1)
            self._lists.append(bool(record.headers))
        self.rows += 1

    def finish(self) -> tuple[Any, ...]:
        headers = None
        if self.headers:
            nulls = self._lists.nulls
            headers = (self._lists.take(), nulls, self._list_offsets.tobytes(), self._header_key.take(),
                       self._header_value.take())
        out = (self.rows, self._offsets.tobytes(), self._timestamps.tobytes(), self._types.tobytes(),
               self._key.take(), self._value.take(), headers)
        self._start()
        return out
