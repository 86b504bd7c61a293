"""A small, deliberately plain interpreter of our schema tables: the parity oracle for the generated codecs.

It walks a `Message`'s fields at run time, one value at a time, with none of the generator's tricks
(no merged structs, no fast paths), and works on plain data: a message is a dict of the fields present
in the version, uuids are strings, bytes and records are `bytes`. If it and the generated code agree on
every message and version, the generator's optimizations have not changed the wire format.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from pybroker.protocol.schema.dsl import TYPE_DEFAULT, Field, Message, Versions

FIXED_FORMATS = {"bool": ">?", "int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H",
                 "uint32": ">I", "float64": ">d"}
PLAIN_TYPE_DEFAULTS: dict[str, Any] = {"bool": False, "float64": 0.0, "uuid": str(uuid.UUID(int=0)),
                                       "string": "", "bytes": b"", "records": None}


class ReferenceDecodeError(Exception):
    """The interpreter could not read the bytes."""


def plain_default(f: Field, version: int) -> Any:
    """The value a field holds when not set, as plain data (a struct: its fields present in `version`)."""
    if f.is_array:
        return []
    if f.is_struct:
        if f.default is None:
            return None
        return {g.name: plain_default(g, version) for g in f.fields if version in g.versions}
    if f.default is not TYPE_DEFAULT:
        return f.default
    return PLAIN_TYPE_DEFAULTS.get(f.type, 0)


def _compact(f: Field, version: int, flexible: Versions) -> bool:
    return version in flexible and (f.flexible is None or version in f.flexible)


# -- encoding -----------------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        if value < 0x80:
            out.append(value)
            return bytes(out)
        out.append((value & 0x7F) | 0x80)
        value >>= 7


def _length(n: int | None, compact: bool, classic_format: str) -> bytes:
    """A length or count; None is null (-1 classic, 0 compact)."""
    if compact:
        return _uvarint(0 if n is None else n + 1)
    return struct.pack(classic_format, -1 if n is None else n)


def _encode_one(f: Field, t: str, value: Any, version: int, flexible: Versions) -> bytes:
    compact = _compact(f, version, flexible)
    if f.is_struct:
        return _encode_fields(f.fields, value, version, flexible)
    if t in FIXED_FORMATS:
        return struct.pack(FIXED_FORMATS[t], value)
    if t == "uuid":
        return uuid.UUID(value).bytes
    if t == "string":
        data = None if value is None else value.encode("utf-8")
        return _length(None if data is None else len(data), compact, ">h") + (data or b"")
    if t in ("bytes", "records"):
        return _length(None if value is None else len(value), compact, ">i") + (value or b"")
    raise AssertionError(f"unknown type {t}")


def _encode_value(f: Field, value: Any, version: int, flexible: Versions) -> bytes:
    if f.is_array:
        if value is None:
            return _length(None, _compact(f, version, flexible), ">i")
        items = b"".join(_encode_one(f, f.element_type, v, version, flexible) for v in value)
        return _length(len(value), _compact(f, version, flexible), ">i") + items
    if f.is_struct and version in f.nullable:
        return b"\xff" if value is None else b"\x01" + _encode_one(f, f.type, value, version, flexible)
    return _encode_one(f, f.type, value, version, flexible)


def _encode_fields(fields: tuple[Field, ...], plain: dict[str, Any], version: int, flexible: Versions) -> bytes:
    out = bytearray()
    tagged: list[tuple[int, bytes]] = []
    is_flexible = version in flexible
    for f in fields:
        if version not in f.versions:
            continue
        value = plain.get(f.name, plain_default(f, version))
        if is_flexible and version in f.tagged:
            if value != plain_default(f, version):
                assert f.tag is not None
                tagged.append((f.tag, _encode_value(f, value, version, flexible)))
            continue
        out += _encode_value(f, value, version, flexible)
    if is_flexible:
        out += _uvarint(len(tagged))
        for tag, data in sorted(tagged):
            out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


def encode(message: Message, plain: dict[str, Any], version: int) -> bytes:
    """The bytes of `plain` (fields missing from it take their defaults) as `version` of `message`."""
    return _encode_fields(message.fields, plain, version, message.flexible)


# -- decoding -----------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ReferenceDecodeError(f"need {n} bytes at {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
        raise ReferenceDecodeError("varint too long")

    def length(self, compact: bool, classic_format: str) -> int:
        return self.uvarint() - 1 if compact else int(self.unpack(classic_format))


def _decode_one(r: _Reader, f: Field, t: str, version: int, flexible: Versions) -> Any:
    compact = _compact(f, version, flexible)
    if f.is_struct:
        return _decode_fields(r, f.fields, version, flexible)
    if t in FIXED_FORMATS:
        return r.unpack(FIXED_FORMATS[t])
    if t == "uuid":
        return str(uuid.UUID(bytes=r.take(16)))
    n = r.length(compact, ">h" if t == "string" else ">i")
    if n == -1 and (version in f.nullable or t == "records"):
        return None
    if n < 0:
        raise ReferenceDecodeError(f"negative length {n}")
    data = r.take(n)
    return data.decode("utf-8") if t == "string" else data


def _decode_value(r: _Reader, f: Field, version: int, flexible: Versions) -> Any:
    if f.is_array:
        n = r.length(_compact(f, version, flexible), ">i")
        if n == -1 and version in f.nullable:
            return None
        if n < 0:
            raise ReferenceDecodeError(f"negative count {n}")
        return [_decode_one(r, f, f.element_type, version, flexible) for _ in range(n)]
    if f.is_struct and version in f.nullable:
        marker = r.unpack(">b")
        return None if marker < 0 else _decode_one(r, f, f.type, version, flexible)
    return _decode_one(r, f, f.type, version, flexible)


def _decode_fields(r: _Reader, fields: tuple[Field, ...], version: int, flexible: Versions) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    is_flexible = version in flexible
    by_tag: dict[int, Field] = {}
    for f in fields:
        if version not in f.versions:
            continue
        if is_flexible and version in f.tagged:
            assert f.tag is not None
            by_tag[f.tag] = f
            plain[f.name] = plain_default(f, version)
            continue
        plain[f.name] = _decode_value(r, f, version, flexible)
    if is_flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            data = r.take(r.uvarint())
            if tag in by_tag:
                sub = _Reader(data)
                plain[by_tag[tag].name] = _decode_value(sub, by_tag[tag], version, flexible)
                if sub.pos != len(data):
                    raise ReferenceDecodeError(f"tagged field {tag} has trailing bytes")
    return plain


def decode(message: Message, data: bytes, version: int) -> dict[str, Any]:
    """The fields present in `version`, as plain data; all of `data` must be consumed."""
    r = _Reader(bytes(data))
    plain = _decode_fields(r, message.fields, version, message.flexible)
    if r.pos != len(r.data):
        raise ReferenceDecodeError(f"{len(r.data) - r.pos} bytes left over")
    return plain
