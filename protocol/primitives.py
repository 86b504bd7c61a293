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


def _null(n: int, nullable: bool, what: str) -> Any:
    """The value of a negative length: null where allowed, else an error."""
    if n == -1 and nullable:
        return None
    raise DecodeError(f"invalid {what} length {n}")


def _classic_length(buf: Any, pos: int, size: Struct) -> int:
    if len(buf) - pos < size.size:
        raise DecodeError("truncated length")
    length: int = size.unpack_from(buf, pos)[0]
    return length


def _compact_length(buf: Any, pos: int) -> tuple[int, int]:
    if pos >= len(buf):
        raise DecodeError("truncated length")
    n = buf[pos]
    if n < 0x80:
        return n - 1, pos + 1
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def read_array_count(buf: Any, pos: int, compact: bool, nullable: bool) -> tuple[int, int]:
    """An array's element count, or -1 for a null array; bounded by the bytes left."""
    if compact:
        n, pos = _compact_length(buf, pos)
    else:
        n = _classic_length(buf, pos, INT32)
        pos += 4
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise DecodeError(f"invalid array length {n}")
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements in {len(buf) - pos} bytes")
    return n, pos


# -- strings and bytes --------------------------------------------------------------------------
# Kept shallow (one helper call for the length): these run several times per request.


def _text(buf: Any, pos: int, end: int) -> str:
    try:
        return str(buf[pos:end], "utf-8")
    except UnicodeDecodeError:
        raise DecodeError("string is not UTF-8") from None


def read_string(buf: Any, pos: int, nullable: bool = False) -> tuple[Any, int]:
    n = _classic_length(buf, pos, INT16)
    pos += 2
    if n < 0:
        return _null(n, nullable, "string"), pos
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"string of {n} bytes in {len(buf) - pos}")
    return _text(buf, pos, end), end


def read_compact_string(buf: Any, pos: int, nullable: bool = False) -> tuple[Any, int]:
    n, pos = _compact_length(buf, pos)
    if n < 0:
        return _null(n, nullable, "string"), pos
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"string of {n} bytes in {len(buf) - pos}")
    return _text(buf, pos, end), end


def read_bytes(buf: Any, pos: int, nullable: bool = False) -> tuple[Any, int]:
    n = _classic_length(buf, pos, INT32)
    pos += 4
    if n < 0:
        return _null(n, nullable, "bytes"), pos
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"bytes of length {n} in {len(buf) - pos}")
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Any, pos: int, nullable: bool = False) -> tuple[Any, int]:
    n, pos = _compact_length(buf, pos)
    if n < 0:
        return _null(n, nullable, "bytes"), pos
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"bytes of length {n} in {len(buf) - pos}")
    return bytes(buf[pos:end]), end


def read_records(buf: Any, pos: int, nullable: bool = True) -> tuple[Any, int]:
    """Records stay opaque: a zero-copy view of the request buffer (writable if the buffer is).

    Null (-1) is accepted in every version, as Kafka's readers accept it.
    """
    n = _classic_length(buf, pos, INT32)
    pos += 4
    if n < 0:
        return _null(n, True, "records"), pos
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"records of length {n} in {len(buf) - pos}")
    return memoryview(buf)[pos:end], end


def read_compact_records(buf: Any, pos: int, nullable: bool = True) -> tuple[Any, int]:
    n, pos = _compact_length(buf, pos)
    if n < 0:
        return _null(n, True, "records"), pos
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"records of length {n} in {len(buf) - pos}")
    return memoryview(buf)[pos:end], end


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


def write_array_count(out: bytearray, value: list[Any] | None, compact: bool) -> None:
    if compact:
        write_uvarint(out, 0 if value is None else len(value) + 1)
    else:
        out += INT32.pack(-1 if value is None else len(value))


def materialize(chunks: list[Any]) -> bytes:
    """Join encoded chunks, reading any file region into memory (tests, non-sendfile paths)."""
    return b"".join(c if isinstance(c, bytes | bytearray | memoryview) else c.read_bytes() for c in chunks)
