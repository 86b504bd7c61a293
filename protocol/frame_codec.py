"""Request and response headers, and whole frames: sans-I/O.

Header rules worth knowing (the headers' tables are in `pybroker.protocol.schema.headers`):
- Request header v1 (api_key, api_version, correlation_id, client_id) for non-flexible request versions,
  v2 (the same plus tagged fields) for flexible ones. Even in v2 the client id is a classic (int16
  length) nullable string, not a compact one. v0 (no client id) was only ever used by ControlledShutdown
  v0, which we do not serve.
- Response header v0 (correlation_id) for non-flexible versions, v1 (plus tagged fields) for flexible
  ones, except ApiVersions, whose response header is always v0: clients read it before they know our
  versions, and one extra byte breaks librdkafka.
- An ApiVersions request of a version we do not serve is answered in the v0 format with
  UNSUPPORTED_VERSION and our full API list, so the client can retry with a version we know.
"""

from __future__ import annotations

from struct import Struct, pack_into
from typing import Any

from pybroker.protocol.messages import REQUESTS, RESPONSES
from pybroker.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from pybroker.protocol.messages.headers import RequestHeader, ResponseHeader
from pybroker.protocol.primitives import DecodeError, UnsupportedVersion

_HEADER_FIXED = Struct(">hhi")
_SIZE_AND_CORRELATION = Struct(">ii")
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION_CODE = 35

__all__ = [
    "DecodeError",
    "RequestHeader",
    "ResponseHeader",
    "UnknownApiKey",
    "UnsupportedVersion",
    "api_versions_fallback_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "peek_header",
    "request_header_version",
    "response_header_version",
]


class UnknownApiKey(Exception):
    def __init__(self, api_key: int, correlation_id: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key
        self.correlation_id = correlation_id


def _is_flexible(cls: Any, version: int) -> bool:
    return cls.FLEXIBLE_MIN is not None and version >= cls.FLEXIBLE_MIN


def request_header_version(request_cls: Any, api_version: int) -> int:
    """2 for a flexible request version, else 1."""
    return 2 if _is_flexible(request_cls, api_version) else 1


def response_header_version(api_key: int, response_cls: Any, api_version: int) -> int:
    """1 for a flexible response version, else 0; always 0 for ApiVersions."""
    return 1 if api_key != API_VERSIONS_KEY and _is_flexible(response_cls, api_version) else 0


def peek_header(frame: Any) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the part of the header that never changes shape."""
    if len(frame) < _HEADER_FIXED.size:
        raise DecodeError("request shorter than its header")
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode_request(frame: Any) -> tuple[RequestHeader, Any]:
    """Decode one request frame (without its size prefix) into its header and message object.

    Unknown keys and versions are refused (`UnknownApiKey`, `UnsupportedVersion`, both carrying the
    correlation id) before anything past the fixed header is read, so the server can still answer.
    Bytes after the message are ignored, as Kafka's broker ignores them (librdkafka sends some).
    """
    api_key, api_version, correlation_id = peek_header(frame)
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise UnknownApiKey(api_key, correlation_id)
    if not cls.MIN_VERSION <= api_version <= cls.MAX_VERSION:
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    header, pos = RequestHeader.decode_prefix(frame, 2 if _is_flexible(cls, api_version) else 1)
    return header, cls.decode(frame, api_version, pos, strict=False)


def encode_response(correlation_id: int, api_key: int, api_version: int, response: Any) -> list[Any]:
    """A whole response frame (size prefix included) as chunks for the writer.

    The first chunk is a bytearray starting with the size prefix; a `records` value that is a file
    region comes out as its own chunk, for the server to send with os.sendfile.
    """
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
    cls = type(request)
    out = bytearray(4)
    header = RequestHeader(cls.API_KEY, version, correlation_id, client_id)
    header.encode_chunks(request_header_version(cls, version), out)
    out += request.encode(version)
    pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def decode_response(frame: Any, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation_id, response) from one response frame without its size prefix."""
    cls = RESPONSES[api_key]
    header, pos = ResponseHeader.decode_prefix(frame, response_header_version(api_key, cls, version))
    return header.correlation_id, cls.decode(frame, version, pos)


def api_versions_fallback_response(correlation_id: int, api_keys: list[tuple[int, int, int]]) -> bytes:
    """Kafka's answer to an ApiVersions version it does not know: v0 layout, UNSUPPORTED_VERSION.

    A whole frame, size prefix and response header v0 included.
    """
    response = ApiVersionsResponse(
        error_code=UNSUPPORTED_VERSION_CODE,
        api_keys=[ApiVersion(api_key=key, min_version=lo, max_version=hi) for key, lo, hi in api_keys],
    )
    body = response.encode(0)
    return _SIZE_AND_CORRELATION.pack(len(body) + 4, correlation_id) + body
