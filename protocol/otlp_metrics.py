"""The numbers in an OpenTelemetry `MetricsData` protobuf, as clients push them (KIP-714), sans-I/O.

Only what an exporter needs is decoded: each metric's name, and for every data point its attributes
and value. Gauges and sums give one value per point (a sum also says whether it is monotonic and
whether its points are deltas); histograms and summaries give their count and sum, exported as
`<name>.count` and `<name>.sum`. Everything else (units, exemplars, scopes, bucket counts) is skipped
by wire type without being read.

A client is hostile: every length is checked against the bytes left, varints stop at 10 bytes, nesting
is fixed by the schema (no recursion on the input's say-so), strings are cut to `MAX_TEXT`, a point
keeps at most `MAX_ATTRIBUTES` attributes, and decoding stops with `OtlpError` past `max_points`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

MAX_TEXT = 256
MAX_ATTRIBUTES = 16
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
CUMULATIVE_TEMPORALITY, DELTA_TEMPORALITY = 2, 1
_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")


class OtlpError(ValueError):
    """The bytes are not a MetricsData message we can read."""


@dataclass(frozen=True, slots=True)
class Point:
    name: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    kind: str  # "gauge" | "counter" (a monotonic sum) | "sum" (a non-monotonic sum)
    delta: bool = False


@dataclass(slots=True)
class MetricsData:
    resource: dict[str, str]
    points: list[Point]


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    for _ in range(10):
        if pos >= end:
            raise OtlpError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise OtlpError("varint longer than 10 bytes")


def _fields(buf: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, value or start, end) for each field of the message in buf[pos:end]."""
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = _varint(buf, pos, end)
            yield number, wire, value, pos
        elif wire == FIXED64:
            if pos + 8 > end:
                raise OtlpError("truncated fixed64")
            yield number, wire, pos, pos + 8
            pos += 8
        elif wire == LENGTH:
            length, pos = _varint(buf, pos, end)
            if length > end - pos:
                raise OtlpError("length past the end of its message")
            yield number, wire, pos, pos + length
            pos += length
        elif wire == FIXED32:
            if pos + 4 > end:
                raise OtlpError("truncated fixed32")
            yield number, wire, pos, pos + 4
            pos += 4
        else:
            raise OtlpError(f"unsupported wire type {wire}")


def _text(buf: memoryview, start: int, end: int) -> str:
    return bytes(buf[start:min(end, start + MAX_TEXT)]).decode("utf-8", "replace")


def _any_value(buf: memoryview, start: int, end: int) -> str:
    for number, wire, a, b in _fields(buf, start, end):
        if number == 1 and wire == LENGTH:
            return _text(buf, a, b)
        if number == 2 and wire == VARINT:
            return "true" if a else "false"
        if number == 3 and wire == VARINT:
            return str(a - (1 << 64) if a >= 1 << 63 else a)
        if number == 4 and wire == FIXED64:
            return repr(_DOUBLE.unpack_from(buf, a)[0])
    return ""


def _key_value(buf: memoryview, start: int, end: int) -> tuple[str, str]:
    key = value = ""
    for number, wire, a, b in _fields(buf, start, end):
        if number == 1 and wire == LENGTH:
            key = _text(buf, a, b)
        elif number == 2 and wire == LENGTH:
            value = _any_value(buf, a, b)
    return key, value


class _Reader:
    def __init__(self, data: bytes, max_points: int) -> None:
        self.buf = memoryview(data)
        self.max_points = max_points
        self.points: list[Point] = []
        self.resource: dict[str, str] = {}

    def add(self, point: Point) -> None:
        if len(self.points) >= self.max_points:
            raise OtlpError(f"more than {self.max_points} data points")
        self.points.append(point)

    def metrics_data(self) -> MetricsData:
        buf = self.buf
        for number, wire, a, b in _fields(buf, 0, len(buf)):
            if number == 1 and wire == LENGTH:
                self.resource_metrics(a, b)
        return MetricsData(self.resource, self.points)

    def resource_metrics(self, start: int, end: int) -> None:
        buf = self.buf
        for number, wire, a, b in _fields(buf, start, end):
            if number == 1 and wire == LENGTH:  # Resource
                for n2, w2, c, d in _fields(buf, a, b):
                    if n2 == 1 and w2 == LENGTH and len(self.resource) < MAX_ATTRIBUTES:
                        key, value = _key_value(buf, c, d)
                        self.resource[key] = value
            elif number == 2 and wire == LENGTH:  # ScopeMetrics
                for n2, w2, c, d in _fields(buf, a, b):
                    if n2 == 2 and w2 == LENGTH:
                        self.metric(c, d)

    def metric(self, start: int, end: int) -> None:
        buf = self.buf
        name = ""
        data: list[tuple[int, int, int]] = []
        for number, wire, a, b in _fields(buf, start, end):
            if number == 1 and wire == LENGTH:
                name = _text(buf, a, b)
            elif number in (5, 7, 9, 10, 11) and wire == LENGTH:
                data.append((number, a, b))
        for number, a, b in data:
            if number in (5, 7):
                self.numbers(name, number == 7, a, b)
            else:
                self.distribution(name, a, b)

    def numbers(self, name: str, is_sum: bool, start: int, end: int) -> None:
        buf = self.buf
        monotonic = delta = False
        points: list[tuple[int, int]] = []
        for number, wire, a, b in _fields(buf, start, end):
            if number == 1 and wire == LENGTH:
                points.append((a, b))
            elif number == 2 and wire == VARINT:
                delta = a == DELTA_TEMPORALITY
            elif number == 3 and wire == VARINT:
                monotonic = bool(a)
        kind = ("counter" if monotonic else "sum") if is_sum else "gauge"
        for a, b in points:
            attributes, value = self.number_point(a, b)
            if value is not None:
                self.add(Point(name, attributes, value, kind, delta and is_sum))

    def number_point(self, start: int, end: int) -> tuple[tuple[tuple[str, str], ...], float | None]:
        buf = self.buf
        attributes: list[tuple[str, str]] = []
        value: float | None = None
        for number, wire, a, b in _fields(buf, start, end):
            if number == 7 and wire == LENGTH and len(attributes) < MAX_ATTRIBUTES:
                attributes.append(_key_value(buf, a, b))
            elif number == 4 and wire == FIXED64:
                value = _DOUBLE.unpack_from(buf, a)[0]
            elif number == 6 and wire == FIXED64:
                value = float(_INT64.unpack_from(buf, a)[0])
        return tuple(attributes), value

    def distribution(self, name: str, start: int, end: int) -> None:
        """Histogram / exponential histogram / summary: each point's count (fixed64 4) and sum (double 5)."""
        buf = self.buf
        for number, wire, a, b in _fields(buf, start, end):
            if number != 1 or wire != LENGTH:
                continue
            attributes: list[tuple[str, str]] = []
            count: float | None = None
            total: float | None = None
            for n2, w2, c, d in _fields(buf, a, b):
                if n2 in (7, 9) and w2 == LENGTH and len(attributes) < MAX_ATTRIBUTES:
                    attributes.append(_key_value(buf, c, d))
                elif n2 == 4 and w2 == FIXED64:
                    count = float(_INT64.unpack_from(buf, c)[0])
                elif n2 == 5 and w2 == FIXED64:
                    total = _DOUBLE.unpack_from(buf, c)[0]
            if count is not None:
                self.add(Point(f"{name}.count", tuple(attributes), count, "counter"))
            if total is not None:
                self.add(Point(f"{name}.sum", tuple(attributes), total, "counter"))


def decode_metrics_data(data: bytes, max_points: int = 10_000) -> MetricsData:
    """The resource attributes and data points of a `MetricsData` message; `OtlpError` if malformed."""
    return _Reader(data, max_points).metrics_data()
