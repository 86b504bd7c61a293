"""Request and response headers, and whole frames: sans-I/O.

Header rules worth knowing:
- Request header v1 (api_key, api_version, correlation_id, client_id) for non-flexible request versions,
  v2 (the same plus tagged fields) for flexible ones. Even in v2 the client id is a classic (int16
  length) nullable string, not a compact one.
- Response header v0 (correlation_id) for non-flexible versions, v1 (plus tagged fields) for flexible
  ones, except ApiVersions, whose response header is always v0: clients read it before they know our
  versions, and one extra byte breaks librdkafka.
- An ApiVersions request of a version we do not serve is answered in the v0 format with
  UNSUPPORTED_VERSION and our full API list, so the client can retry with a version we know.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct, pack_into
from typing import Any

from pybroker.protocol.messages import REQUESTS, RESPONSES
from pybroker.protocol.primitives import (
    DecodeError,
    UnsupportedVersion,
    read_string,
    skip_tagged_fields,
    write_string,
)

_HEADER_FIXED = Struct(">hhi")
_INT32 = Struct(">i")
_FALLBACK_ENTRY = Struct(">hhh")
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION_CODE = 35

__all__ = [
    "DecodeError",
    "RequestHeader",
    "UnknownApiKey",
    "UnsupportedVersion",
    "api_versions_fallback_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "peek_header",
]


class UnknownApiKey(Exception):
    def __init__(self, api_key: int, correlation_id: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key
        self.correlation_id = correlation_id


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _is_flexible(cls: Any, version: int) -> bool:
    return cls.FLEXIBLE_MIN is not None and version >= cls.FLEXIBLE_MIN


def peek_header(frame: Any) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the part of the header that never changes shape."""
    if len(frame) < _HEADER_FIXED.size:
        raise DecodeError("request shorter than its header")
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode_request(frame: Any) -> tuple[RequestHeader, Any]:
    """Decode one request frame (without its size prefix) into its header and message object."""
    api_key, api_version, correlation_id = peek_header(frame)
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise UnknownApiKey(api_key, correlation_id)
    if not cls.MIN_VERSION <= api_version <= cls.MAX_VERSION:
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    client_id, pos = read_string(frame, _HEADER_FIXED.size, True)
    if _is_flexible(cls, api_version):
        pos = skip_tagged_fields(frame, pos)
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    return header, cls.decode(frame, api_version, pos, strict=False)


def encode_response(correlation_id: int, api_key: int, api_version: int, response: Any) -> list[Any]:
    """A whole response frame (size prefix included) as chunks for the writer."""
    out = bytearray(8)
    pack_into(">ii", out, 0, 0, correlation_id)
    if api_key != API_VERSIONS_KEY and _is_flexible(type(response), api_version):
        out.append(0)  # response header v1: no tagged fields
    chunks = response.encode_chunks(api_version, out)
    size = sum(len(c) for c in chunks) - 4
    first = chunks[0]
    if not isinstance(first, bytearray):
        first = chunks[0] = bytearray(first)
    pack_into(">i", first, 0, size)
    return chunks


def encode_request(request: Any, version: int, correlation_id: int, client_id: str | None = "pybroker") -> bytes:
    """A whole request frame, size prefix included (tests and tools talking to a broker)."""
    out = bytearray(4)
    out += _HEADER_FIXED.pack(request.API_KEY, version, correlation_id)
    write_string(out, client_id)
    if _is_flexible(type(request), version):
        out.append(0)
    body = request.encode(version)
    out += body
    pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def decode_response(frame: Any, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation_id, response) from one response frame without its size prefix."""
    cls = RESPONSES[api_key]
    if len(frame) < 4:
        raise DecodeError("response shorter than its header")
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    pos = 4
    if api_key != API_VERSIONS_KEY and _is_flexible(cls, version):
        pos = skip_tagged_fields(frame, pos)
    return correlation_id, cls.decode(frame, version, pos)


def api_versions_fallback_response(correlation_id: int, api_keys: list[tuple[int, int, int]]) -> bytes:
    """Kafka's answer to an ApiVersions version it does not know: v0 layout, UNSUPPORTED_VERSION."""
    out = bytearray(4)
    out += _INT32.pack(correlation_id)
    out += Struct(">hi").pack(UNSUPPORTED_VERSION_CODE, len(api_keys))
    for key, lo, hi in api_keys:
        out += _FALLBACK_ENTRY.pack(key, lo, hi)
    pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)
