"""The record walk: every record of a batch checked field by field without building a Record.

This is the one module compiled with mypyc at install (`setup.py`); when the compiled extension is
absent (`PYBROKER_PURE_PYTHON=1`, or no C compiler), Python imports this same source instead, so
both give the same verdicts by construction. `COMPILED` says which one is running.

Written for mypyc: plain `int` and `bytes`, no imports from the rest of pybroker, no closures, tuples
returned unboxed. It raises `MalformedRecords` with a message for the first problem it meets; the
caller (`records_check`) turns that into Kafka's INVALID_RECORD, as Kafka's `DefaultRecord.readFrom`
turns any structural problem into an InvalidRecordException.

The rules are Kafka's record layout (v2), read strictly:
- a record is a varint length, then exactly that many bytes: attributes (1 byte), timestamp delta
  (varlong, at most 10 bytes), offset delta (varint, at most 5 bytes), key and value (varint length,
  negative = null, else that many bytes inside the record), a header count (not negative, not more
  than the bytes left) and each header's key (never null) and value;
- the records fill the record bytes exactly, and there are exactly `records_count` of them;
- offset deltas: on the produce path (`consecutive`) the i-th record's delta is i and the last one's
  is `last_offset_delta` (Kafka rewrites such a batch; we store batches as received, so we refuse
  it); in a stored batch (the cleaner may have dropped records) they only grow, up to
  `last_offset_delta`;
- record attributes are unused: Kafka ignores them and every client writes 0. On the produce path we
  refuse anything else, because kafka-python reads that byte as a varint and loses its place in the
  batch when it is 0x80 or more; a stored batch may hold any value. Likewise a header key must be
  UTF-8 in a produced record (Java producers cannot write anything else; Java consumers would turn
  the bytes into replacement characters and kafka-python refuses the batch).
"""

from __future__ import annotations

from typing import Final

#: at most this many bytes in a zigzag varint of 32 bits, and of 64 bits
_INT32_BYTES: Final = 5
_INT64_BYTES: Final = 10
#: attributes, timestamp delta, offset delta, key length, value length, header count: one byte each at least
_MIN_RECORD_BODY: Final = 6


class MalformedRecords(ValueError):
    """The record bytes do not hold what the batch header says they hold; `index` is the first bad
    record's place in the batch (-1 when no one record is to blame, e.g. a count that does not match)."""

    def __init__(self, message: str, index: int = -1) -> None:
        super().__init__(message)
        self.index = index


# what a varint or length describes: an index into _FIELD_NAMES, so that no message is built unless needed
_LENGTH: Final = 0
_TIMESTAMP_DELTA: Final = 1
_OFFSET_DELTA: Final = 2
_KEY: Final = 3
_VALUE: Final = 4
_HEADER_COUNT: Final = 5
_HEADER_KEY: Final = 6
_HEADER_VALUE: Final = 7
_FIELD_NAMES: Final = ("length", "timestamp delta", "offset delta", "key", "value", "header count",
                       "header key", "header value")


def _malformed(index: int, what: int, problem: str) -> MalformedRecords:
    return MalformedRecords(f"record {index} {_FIELD_NAMES[what]}: {problem}", index)


class RecordsSummary:
    """What a walk learned: enough for the produce path (timestamps, keys) without any Record object."""

    def __init__(self, count: int, min_timestamp_delta: int, max_timestamp_delta: int,
                 first_keyless: int) -> None:
        self.count = count
        #: smallest and largest timestamp delta over the records (0 and 0 for no records)
        self.min_timestamp_delta = min_timestamp_delta
        self.max_timestamp_delta = max_timestamp_delta
        #: index of the first record without a key, -1 when every record has one
        self.first_keyless = first_keyless

    @property
    def all_keyed(self) -> bool:
        return self.first_keyless < 0


def _varint(buf: bytes, pos: int, end: int, max_bytes: int, bits: int, index: int, what: int) -> tuple[int, int]:
    """A zigzag varint of at most `bits` bits and `max_bytes` bytes in buf[pos:end]: (value, next position)."""
    raw = 0
    shift = 0
    limit = pos + max_bytes
    if limit > end:
        limit = end
    while pos < limit:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            if raw >> bits:
                raise _malformed(index, what, f"varint wider than {bits} bits")
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    if shift < 7 * max_bytes:
        raise _malformed(index, what, "truncated varint")
    raise _malformed(index, what, f"varint longer than {max_bytes} bytes")


def _int32(buf: bytes, pos: int, end: int, index: int, what: int) -> tuple[int, int]:
    if pos < end:
        byte = buf[pos]
        if byte < 0x80:  # one byte: the common case for lengths and deltas
            return (byte >> 1) ^ -(byte & 1), pos + 1
    return _varint(buf, pos, end, _INT32_BYTES, 32, index, what)


def _int64(buf: bytes, pos: int, end: int, index: int, what: int) -> tuple[int, int]:
    if pos < end:
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
    return _varint(buf, pos, end, _INT64_BYTES, 64, index, what)


def _skip_blob(buf: bytes, pos: int, end: int, index: int, what: int) -> tuple[int, int]:
    """Skip a varint length and that many bytes: (length, next position); a negative length is null."""
    size, pos = _int32(buf, pos, end, index, what)
    if size > end - pos:
        raise _malformed(index, what, f"length {size} overruns the record ({end - pos} bytes left)")
    if size > 0:
        pos += size
    return size, pos


def _skip_headers(buf: bytes, pos: int, end: int, index: int, strict_keys: bool) -> int:
    count, pos = _int32(buf, pos, end, index, _HEADER_COUNT)
    if count < 0 or count > end - pos:
        raise _malformed(index, _HEADER_COUNT, f"{count} is impossible with {end - pos} bytes left in the record")
    for _ in range(count):
        key_size, pos = _skip_blob(buf, pos, end, index, _HEADER_KEY)
        if key_size < 0:
            raise _malformed(index, _HEADER_KEY, "null")
        if strict_keys and not _is_utf8(buf, pos - key_size, pos):
            raise _malformed(index, _HEADER_KEY, "not UTF-8")
        _, pos = _skip_blob(buf, pos, end, index, _HEADER_VALUE)
    return pos


def _is_utf8(buf: bytes, start: int, end: int) -> bool:
    """Header keys are strings: ASCII is checked byte by byte, anything else by decoding it."""
    pos = start
    while pos < end:
        if buf[pos] >= 0x80:
            try:
                buf[start:end].decode("utf-8")
            except UnicodeDecodeError:
                return False
            return True
        pos += 1
    return True


def _count_whole_records(buf: bytes, pos: int, end: int) -> int:
    """How many well-formed records (offset deltas aside) fill buf[pos:end] exactly; -1 if they do not."""
    found = 0
    while pos < end:
        try:
            length, pos = _int32(buf, pos, end, found, _LENGTH)
            if length < _MIN_RECORD_BODY or length > end - pos:
                return -1
            record_end = pos + length
            _, field = _int64(buf, pos + 1, record_end, found, _TIMESTAMP_DELTA)
            _, field = _int32(buf, field, record_end, found, _OFFSET_DELTA)
            _, field = _skip_blob(buf, field, record_end, found, _KEY)
            _, field = _skip_blob(buf, field, record_end, found, _VALUE)
            if _skip_headers(buf, field, record_end, found, False) != record_end:
                return -1
        except MalformedRecords:
            return -1
        pos = record_end
        found += 1
    return found


def _plural(count: int) -> str:
    return "record" if count == 1 else "records"


def walk(buf: bytes, start: int, end: int, records_count: int, last_offset_delta: int,
         consecutive: bool) -> RecordsSummary:
    """Check the records in buf[start:end] against the batch header's `records_count` and
    `last_offset_delta`; `consecutive` asks for offset deltas 0, 1, 2... (produced batches).

    Returns a summary; raises MalformedRecords naming the first problem.
    """
    if start < 0 or end > len(buf) or start > end:
        raise MalformedRecords("record bytes outside the buffer")
    if records_count < 0:
        raise MalformedRecords(f"records_count {records_count} is negative")
    pos = start
    min_delta = 0
    max_delta = 0
    first_keyless = -1
    previous_offset = -1
    index = 0
    while index < records_count:
        if pos >= end:
            raise MalformedRecords(f"records_count {records_count} but the batch holds {index} {_plural(index)}")
        length, pos = _int32(buf, pos, end, index, _LENGTH)
        if length < _MIN_RECORD_BODY:
            raise MalformedRecords(f"record {index} length {length} is below the smallest record "
                                   f"({_MIN_RECORD_BODY} bytes)", index)
        if length > end - pos:
            raise MalformedRecords(f"record {index} length {length} overruns the batch ({end - pos} bytes left)",
                                   index)
        record_end = pos + length
        if consecutive and buf[pos] != 0:
            raise MalformedRecords(f"record {index} attributes {buf[pos]}: must be 0 in a produced record", index)
        pos += 1  # attributes: unused in v2 records
        timestamp_delta, pos = _int64(buf, pos, record_end, index, _TIMESTAMP_DELTA)
        offset_delta, pos = _int32(buf, pos, record_end, index, _OFFSET_DELTA)
        if consecutive:
            if offset_delta != index:
                raise MalformedRecords(f"record {index} has offset delta {offset_delta}, expected {index}", index)
        elif offset_delta <= previous_offset or offset_delta > last_offset_delta:
            raise MalformedRecords(f"record {index} has offset delta {offset_delta}, after {previous_offset} "
                                   f"and at most {last_offset_delta}", index)
        previous_offset = offset_delta
        key_size, pos = _skip_blob(buf, pos, record_end, index, _KEY)
        if key_size < 0 and first_keyless < 0:
            first_keyless = index
        _, pos = _skip_blob(buf, pos, record_end, index, _VALUE)
        pos = _skip_headers(buf, pos, record_end, index, consecutive)
        if pos != record_end:
            raise MalformedRecords(f"record {index} fields end {record_end - pos} bytes before its length says",
                                   index)
        if index == 0:
            min_delta = max_delta = timestamp_delta
        elif timestamp_delta > max_delta:
            max_delta = timestamp_delta
        elif timestamp_delta < min_delta:
            min_delta = timestamp_delta
        index += 1
    if pos != end:
        extra = _count_whole_records(buf, pos, end)
        if extra > 0:
            total = records_count + extra
            raise MalformedRecords(f"records_count {records_count} but the batch holds {total} {_plural(total)}")
        raise MalformedRecords(f"{end - pos} bytes after the last of {records_count} {_plural(records_count)}")
    if consecutive and records_count > 0 and previous_offset != last_offset_delta:
        raise MalformedRecords(f"last_offset_delta {last_offset_delta} but the last record's offset delta "
                               f"is {previous_offset}")
    return RecordsSummary(records_count, min_delta, max_delta, first_keyless)


def record_facts(buf: bytes, start: int, end: int, records_count: int) -> tuple[list[int], list[int]]:
    """(indexes of the records without a key, every record's timestamp delta) of records `walk` accepted.

    Only the refusal path calls this (to name every bad record, as Kafka's LogValidator does), so the
    walk itself keeps no per-record lists. Malformed bytes raise MalformedRecords as in `walk`."""
    keyless: list[int] = []
    deltas: list[int] = []
    pos = start
    index = 0
    while index < records_count and pos < end:
        length, pos = _int32(buf, pos, end, index, _LENGTH)
        if length < _MIN_RECORD_BODY or length > end - pos:
            raise MalformedRecords(f"record {index} length {length} is impossible", index)
        record_end = pos + length
        timestamp_delta, field = _int64(buf, pos + 1, record_end, index, _TIMESTAMP_DELTA)
        _, field = _int32(buf, field, record_end, index, _OFFSET_DELTA)
        key_size, field = _skip_blob(buf, field, record_end, index, _KEY)
        if key_size < 0:
            keyless.append(index)
        deltas.append(timestamp_delta)
        pos = record_end
        index += 1
    return keyless, deltas


#: True when this module runs as the mypyc-compiled extension, False when it is this Python source
COMPILED: Final = not __file__.endswith(".py")
