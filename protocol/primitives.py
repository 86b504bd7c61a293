"""Low-level readers and writers of Kafka's primitive types, shared by the generated codecs.

Every reader takes ``(buf, pos)`` and returns ``(value, new_pos)``; every length is checked against
the bytes that remain *before* anything is sliced or allocated, and every failure is one typed
`DecodeError`. Writers append to a ``bytearray``.
"""

from __future__ import annotations

import uuid
from struct import Struct
from typing import Any

INT16 = Struct(">h")
INT32 = Struct(">i")
UINT32 = Struct(">I")
ZERO_UUID = uuid.UUID(int=0)
ZERO_UUID_BYTES = bytes(16)


class DecodeError(ValueError):
    """Bytes that are not a valid encoding of the expected message."""


class UnsupportedVersion(Exception):
    def __init__(self, api_key: int, version: int, correlation_id: int = -1) -> None:
        super().__init__(f"api {api_key} version {version} is not supported")
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id


# -- varints ------------------------------------------------------------------------------------


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's lengths, counts and tags)."""
    try:
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
        value = byte & 0x7F
        shift = 7
        for i in range(1, 5):
            byte = buf[pos + i]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, pos + i + 1
            shift += 7
    except IndexError:
        raise DecodeError("truncated varint") from None
    raise DecodeError("varint longer than 5 bytes")


def write_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


# -- lengths ------------------------------------------------------------------------------------


def _check(buf: Any, pos: int, n: int) -> None:
    if n > len(buf) - pos:
        raise DecodeError(f"length {n} exceeds the {len(buf) - pos} bytes left")


def read_len16(buf: Any, pos: int) -> tuple[int, int]:
    if len(buf) - pos < 2:
        raise DecodeError("truncated length")
    return INT16.unpack_from(buf, pos)[0], pos + 2


def read_len32(buf: Any, pos: int) -> tuple[int, int]:
    if len(buf) - pos < 4:
        raise DecodeError("truncated length")
    return INT32.unpack_from(buf, pos)[0], pos + 4


def read_compact_len(buf: Any, pos: int) -> tuple[int, int]:
    value, pos = read_uvarint(buf, pos)
    return value - 1, pos


def read_array_count(buf: Any, pos: int, compact: bool, nullable: bool) -> tuple[int, int]:
    """An array's element count, or -1 for a null array; bounded by the bytes left."""
    n, pos = read_compact_len(buf, pos) if compact else read_len32(buf, pos)
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise DecodeError(f"invalid array length {n}")
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements in {len(buf) - pos} bytes")
    return n, pos


# -- strings and bytes --------------------------------------------------------------------------


def _string_body(buf: Any, pos: int, n: int, nullable: bool) -> tuple[str | None, int]:
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise DecodeError(f"invalid string length {n}")
    _check(buf, pos, n)
    try:
        return str(buf[pos : pos + n], "utf-8"), pos + n
    except UnicodeDecodeError:
        raise DecodeError("string is not UTF-8") from None


def read_string(buf: Any, pos: int, nullable: bool = False) -> tuple[Any, int]:
    n, pos = read_len16(buf, pos)
    return _string_body(buf, pos, n, nullable)


def read_compact_string(buf: Any, pos: int, nullable: bool = False) -> tuple[Any, int]:
    n, pos = read_compact_len(buf, pos)
    return _string_body(buf, pos, n, nullable)


def _bytes_body(buf: Any, pos: int, n: int, nullable: bool) -> tuple[bytes | None, int]:
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise DecodeError(f"invalid bytes length {n}")
    _check(buf, pos, n)
    return bytes(buf[pos : pos + n]), pos + n


def read_bytes(buf: Any, pos: int, nullable: bool = False) -> tuple[Any, int]:
    n, pos = read_len32(buf, pos)
    return _bytes_body(buf, pos, n, nullable)


def read_compact_bytes(buf: Any, pos: int, nullable: bool = False) -> tuple[Any, int]:
    n, pos = read_compact_len(buf, pos)
    return _bytes_body(buf, pos, n, nullable)


def _records_body(buf: Any, pos: int, n: int) -> tuple[memoryview | None, int]:
    if n < 0:
        if n == -1:
            return None, pos
        raise DecodeError(f"invalid records length {n}")
    _check(buf, pos, n)
    return memoryview(buf)[pos : pos + n], pos + n


def read_records(buf: Any, pos: int, nullable: bool = True) -> tuple[Any, int]:
    """Records stay opaque: a zero-copy view of the request buffer (writable if the buffer is)."""
    n, pos = read_len32(buf, pos)
    return _records_body(buf, pos, n)


def read_compact_records(buf: Any, pos: int, nullable: bool = True) -> tuple[Any, int]:
    n, pos = read_compact_len(buf, pos)
    return _records_body(buf, pos, n)


def read_uuid(buf: Any, pos: int) -> tuple[uuid.UUID, int]:
    _check(buf, pos, 16)
    raw = bytes(buf[pos : pos + 16])
    return (ZERO_UUID if raw == ZERO_UUID_BYTES else uuid.UUID(bytes=raw)), pos + 16


def skip_tagged_fields(buf: Any, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        _check(buf, pos, size)
        pos += size
    return pos


# -- writers ------------------------------------------------------------------------------------


def write_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode()
    out += INT16.pack(len(data))
    out += data


def write_compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode()
    write_uvarint(out, len(data) + 1)
    out += data


def write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value))
    out += value


def write_compact_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


def _write_records_body(out: bytearray, chunks: list[Any], value: Any) -> None:
    if isinstance(value, bytes | bytearray | memoryview):
        out += value
    else:
        # a file region: everything so far becomes a chunk, the region its own chunk
        chunks.append(bytes(out))
        out.clear()
        chunks.append(value)


def write_records(out: bytearray, chunks: list[Any], value: Any) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value))
    _write_records_body(out, chunks, value)


def write_compact_records(out: bytearray, chunks: list[Any], value: Any) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    _write_records_body(out, chunks, value)


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


def write_array_count(out: bytearray, value: list[Any] | None, compact: bool) -> None:
    if compact:
        write_uvarint(out, 0 if value is None else len(value) + 1)
    else:
        out += INT32.pack(-1 if value is None else len(value))


def materialize(chunks: list[Any]) -> bytes:
    """Join encoded chunks, reading any file region into memory (tests, non-sendfile paths)."""
    return b"".join(c if isinstance(c, bytes | bytearray | memoryview) else c.read_bytes() for c in chunks)
