"""Zigzag varints, the integer encoding inside v2 records (protobuf's, as Kafka uses it).

Reads are bounded: at most 5 bytes for a 32-bit varint and 10 for a 64-bit varlong, and a value that
does not fit its width is refused, so a hostile record can neither loop nor smuggle huge numbers.
"""

from __future__ import annotations

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import Buffer, RecordsError

_INT32_BYTES = 5
_INT64_BYTES = 10
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _read(buf: Buffer, pos: int, max_bytes: int, bits: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    end = pos + max_bytes
    if end > len(buf):
        end = len(buf)
    while pos < end:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            if raw >> bits:
                raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"varint wider than {bits} bits")
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    if shift < 7 * max_bytes:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "truncated varint")
    raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"varint longer than {max_bytes} bytes")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag varint of at most 32 bits at `pos`: (value, position after it)."""
    if pos < len(buf) and buf[pos] < 0x80:  # one byte: the common case for lengths and deltas
        raw = buf[pos]
        return (raw >> 1) ^ -(raw & 1), pos + 1
    return _read(buf, pos, _INT32_BYTES, 32)


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag varlong of at most 64 bits at `pos`: (value, position after it)."""
    if pos < len(buf) and buf[pos] < 0x80:
        raw = buf[pos]
        return (raw >> 1) ^ -(raw & 1), pos + 1
    return _read(buf, pos, _INT64_BYTES, 64)


def write_varint(out: bytearray, value: int) -> None:
    """Append `value` (any int64) zigzag-encoded; widths are the reader's business."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit in 64 bits")
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def varint_size(value: int) -> int:
    """Bytes `write_varint` uses for `value`."""
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    return max(1, (zigzag.bit_length() + 6) // 7)
