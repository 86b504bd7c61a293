"""Whole frames: headers, size prefixes, the ApiVersions special cases, and kafka-python's framing as an oracle."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from pybroker.protocol.frame_codec import (
    RequestHeader,
    ResponseHeader,
    UnknownApiKey,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
)
from pybroker.protocol.messages import REQUESTS, RESPONSES
from pybroker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from pybroker.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataResponse
from pybroker.protocol.primitives import DecodeError, materialize
from tests.unit.protocol.test_oracle import THEIRS

INT32 = struct.Struct(">i")


def _frame(chunks: list[Any]) -> bytes:
    data = materialize(chunks)
    assert INT32.unpack_from(data)[0] == len(data) - 4
    return data


# -- against kafka-python's own framing ------------------------------------------------------------


def _framing_cases(registry: dict[int, Any]) -> list[tuple[Any, int]]:
    cases = []
    for cls in registry.values():
        theirs = THEIRS.get(cls.__name__)
        if theirs is None:
            continue
        cases += [(cls, v) for v in range(cls.MIN_VERSION, min(cls.MAX_VERSION, theirs.max_version) + 1)]
    return cases


def _case_id(value: Any) -> str:
    return value.__name__ if isinstance(value, type) else str(value)


@pytest.mark.parametrize(("cls", "version"), _framing_cases(REQUESTS), ids=_case_id)
@pytest.mark.parametrize("client_id", ["kafka-python", None, "ünï"])
def test_request_frames_match_kafka_python(cls: Any, version: int, client_id: str | None) -> None:
    theirs = THEIRS[cls.__name__](version=version)
    theirs.with_header(correlation_id=123456, client_id=client_id)
    frame = bytes(theirs.encode(header=True, framed=True))
    header, request = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        cls.API_KEY, version, 123456, client_id)
    assert isinstance(request, cls)
    assert encode_request(request, version, 123456, client_id) == frame


@pytest.mark.parametrize(("cls", "version"), _framing_cases(RESPONSES), ids=_case_id)
def test_response_frames_match_kafka_python(cls: Any, version: int) -> None:
    theirs = THEIRS[cls.__name__](version=version)
    theirs.with_header(correlation_id=-7)
    frame = bytes(theirs.encode(header=True, framed=True))
    correlation_id, response = decode_response(frame[4:], cls.API_KEY, version)
    assert correlation_id == -7
    assert _frame(encode_response(-7, cls.API_KEY, version, response)) == frame


# -- header rules -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    response = ApiVersionsResponse(error_code=0)
    frame = _frame(encode_response(99, 18, version, response))
    assert frame[4:8] == INT32.pack(99)
    assert frame[8:] == response.encode(version)  # no tagged-field byte between header and body


def test_flexible_response_header_has_tagged_fields() -> None:
    frame = _frame(encode_response(5, 3, 12, MetadataResponse()))
    assert frame[4:9] == INT32.pack(5) + b"\x00"
    assert frame[9:] == MetadataResponse().encode(12)
    assert _frame(encode_response(5, 3, 8, MetadataResponse()))[8:] == MetadataResponse().encode(8)


def test_flexible_request_header_keeps_a_classic_client_id() -> None:
    frame = encode_request(MetadataRequest(topics=None), 12, 7, "abc")
    assert frame[4:12] == struct.pack(">hhi", 3, 12, 7)
    assert frame[12:18] == b"\x00\x03abc\x00"  # int16 length, not a compact varint; then no tags
    assert decode_request(frame[4:])[0].client_id == "abc"
    null_client = encode_request(MetadataRequest(topics=None), 12, 7, None)
    assert null_client[12:15] == b"\xff\xff\x00"


def test_header_tables_match_the_hand_written_paths() -> None:
    """frames writes the response header by hand (hot path); the generated header codec must agree."""
    assert RequestHeader(3, 12, 7, "abc").encode(2) == encode_request(MetadataRequest(), 12, 7, "abc")[4:18]
    assert ResponseHeader(5).encode(1) == _frame(encode_response(5, 3, 12, MetadataResponse()))[4:9]
    assert ResponseHeader(5).encode(0) == _frame(encode_response(5, 3, 1, MetadataResponse()))[4:8]


def test_request_header_tagged_fields_are_skipped() -> None:
    frame = bytearray(encode_request(MetadataRequest(topics=None), 12, 7, "abc")[4:])
    tagged = b"\x01\x05\x02hi"  # one unknown tag (5) of two bytes
    frame[13:14] = tagged
    header, request = decode_request(frame)
    assert header.client_id == "abc"
    assert request.topics is None


# -- errors the server answers or closes on -------------------------------------------------------------


def test_unknown_api_key_carries_the_correlation_id() -> None:
    with pytest.raises(UnknownApiKey) as info:
        decode_request(struct.pack(">hhi", 9999, 0, 42) + b"garbage")
    assert (info.value.api_key, info.value.correlation_id) == (9999, 42)


def test_unsupported_version_is_raised_before_the_rest_is_read() -> None:
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(struct.pack(">hhi", 18, 77, 43) + b"\xff")
    assert (info.value.api_key, info.value.version, info.value.correlation_id) == (18, 77, 43)


@pytest.mark.parametrize("frame", [b"", b"\x00\x03\x00", struct.pack(">hhi", 3, 1, 1),
                                   struct.pack(">hhi", 3, 1, 1) + b"\x00\x05ab",
                                   struct.pack(">hhih", 3, 1, 1, -1) + b"\x00\x00"])
def test_short_or_broken_requests_are_decode_errors(frame: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_request(frame)


def test_trailing_bytes_after_a_request_are_ignored() -> None:
    frame = encode_request(MetadataRequest(topics=None), 13, 1, "x")[4:] + b"\x00\x00"
    assert decode_request(frame)[1] == MetadataRequest(topics=None)


def test_peek_header() -> None:
    assert peek_header(struct.pack(">hhi", 1, 17, -5)) == (1, 17, -5)
    with pytest.raises(DecodeError):
        peek_header(b"\x00\x01")


def test_api_versions_fallback_is_a_v0_response_with_unsupported_version() -> None:
    apis = [(0, 0, 11), (3, 0, 13), (18, 0, 4)]
    frame = api_versions_fallback_response(31, apis)
    assert INT32.unpack_from(frame)[0] == len(frame) - 4
    assert frame[4:8] == INT32.pack(31)
    response = ApiVersionsResponse.decode(frame, 0, offset=8)
    assert response.error_code == 35
    assert [(a.api_key, a.min_version, a.max_version) for a in response.api_keys] == apis
    their = THEIRS["ApiVersionsResponse"].decode(frame[8:], version=0)
    assert their.error_code == 35


def test_api_versions_request_round_trip() -> None:
    request = ApiVersionsRequest(client_software_name="librdkafka", client_software_version="2.0.2")
    header, decoded = decode_request(encode_request(request, 3, 1, "rdkafka")[4:])
    assert (header.api_version, decoded) == (3, request)


# -- file regions (sendfile) ---------------------------------------------------------------------------


class FakeRegion:
    """Stands in for a file range the server would splice in with os.sendfile."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def read_bytes(self) -> bytes:
        return self.data


@pytest.mark.parametrize("version", [4, 11, 12, 17])
def test_file_regions_become_their_own_chunks(version: int) -> None:
    batches = [b"A" * 100, b"B" * 7]

    def response(records: list[Any]) -> FetchResponse:
        return FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[
            PartitionData(partition_index=i, records=r) for i, r in enumerate(records)])])

    with_regions = response([FakeRegion(b) for b in batches])
    with_bytes = response(batches)
    chunks = encode_response(8, 1, version, with_regions)
    regions = [c for c in chunks if isinstance(c, FakeRegion)]
    assert [r.data for r in regions] == batches
    assert isinstance(chunks[0], bytearray)
    assert _frame(chunks) == _frame(encode_response(8, 1, version, with_bytes))
    assert with_regions.encode(version) == with_bytes.encode(version)
    assert materialize(with_regions.encode_chunks(version)) == with_bytes.encode(version)
