"""Building OTLP `MetricsData` protobufs by hand, as clients push them (KIP-714), for tests and fuzz seeds."""

from __future__ import annotations

import struct


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fixed64(number: int, raw: bytes) -> bytes:
    return varint(number << 3 | 1) + raw


def key_value(key: str, value: str) -> bytes:
    return field(1, key.encode()) + field(2, field(1, value.encode()))


def number_point(value: float | int, attributes: dict[str, str] | None = None) -> bytes:
    raw = fixed64(4, struct.pack("<d", value)) if isinstance(value, float) else fixed64(6, struct.pack("<q", value))
    return b"".join(field(7, key_value(k, v)) for k, v in (attributes or {}).items()) + raw


def gauge(name: str, *points: bytes) -> bytes:
    return field(1, name.encode()) + field(5, b"".join(field(1, p) for p in points))


def monotonic_sum(name: str, *points: bytes, delta: bool = False) -> bytes:
    body = b"".join(field(1, p) for p in points) + varint(2 << 3) + varint(1 if delta else 2) + varint(3 << 3) + b"\x01"
    return field(1, name.encode()) + field(7, body)


def metrics_data(*metrics: bytes, resource: dict[str, str] | None = None) -> bytes:
    scope = b"".join(field(2, m) for m in metrics)
    resource_part = field(1, b"".join(field(1, key_value(k, v)) for k, v in (resource or {}).items()))
    return field(1, resource_part + field(2, scope))
