"""The low-level readers against hostile bytes, and the value types the generated codecs hand out.

Every failure must be one `DecodeError`, raised before anything is allocated from an untrusted length
(CVE-2022-34917 was a broker allocating what a request's length field said).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.protocol.messages.fetch import FetchRequest
from pybroker.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.primitives import (
    DecodeError,
    UnsupportedVersion,
    read_array_count,
    read_bytes,
    read_compact_bytes,
    read_compact_records,
    read_compact_string,
    read_records,
    read_string,
    read_uuid,
    read_uvarint,
    skip_tagged_fields,
    write_uvarint,
)

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")


@given(st.integers(0, 2**35 - 1))
def test_uvarint_round_trip(value: int) -> None:
    out = bytearray()
    write_uvarint(out, value)
    assert len(out) <= 5
    assert read_uvarint(bytes(out), 0) == (value, len(out))


def test_uvarint_longer_than_five_bytes_is_refused() -> None:
    with pytest.raises(DecodeError):
        read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff\xff"])
def test_truncated_uvarint(data: bytes) -> None:
    with pytest.raises(DecodeError):
        read_uvarint(data, 0)


READERS: list[tuple[str, Callable[..., Any], bytes]] = [
    ("string", read_string, INT16.pack(-2)),
    ("string", read_string, INT16.pack(32767) + b"abc"),
    ("bytes", read_bytes, INT32.pack(-7)),
    ("bytes", read_bytes, INT32.pack(2**31 - 1) + b"abc"),
    ("records", read_records, INT32.pack(-3)),
    ("records", read_records, INT32.pack(2**31 - 1) + b"abc"),
    ("compact string", read_compact_string, b"\xff\xff\xff\xff\x0f" + b"abc"),
    ("compact bytes", read_compact_bytes, b"\xff\xff\xff\xff\x0f"),
    ("compact records", read_compact_records, b"\x05ab"),
    ("uuid", read_uuid, bytes(15)),
    ("string", read_string, b"\x00"),
]


@pytest.mark.parametrize(("kind", "reader", "data"), READERS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(READERS)])
def test_bad_lengths_raise_decode_error(kind: str, reader: Callable[..., Any], data: bytes) -> None:
    with pytest.raises(DecodeError):
        reader(data, 0)


def test_null_only_where_nullable() -> None:
    assert read_string(INT16.pack(-1), 0, True) == (None, 2)
    with pytest.raises(DecodeError):
        read_string(INT16.pack(-1), 0, False)
    assert read_compact_string(b"\x00", 0, True) == (None, 1)
    with pytest.raises(DecodeError):
        read_compact_bytes(b"\x00", 0, False)


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        read_string(INT16.pack(2) + b"\xc3\x28", 0)


def test_array_counts_are_bounded_by_the_bytes_left() -> None:
    assert read_array_count(INT32.pack(-1), 0, False, True) == (-1, 4)
    for data, compact, nullable in [(INT32.pack(-1), False, False), (INT32.pack(-2), False, True),
                                    (INT32.pack(5) + bytes(4), False, False), (b"\x0a" + bytes(8), True, False)]:
        with pytest.raises(DecodeError):
            read_array_count(data, 0, compact, nullable)


def test_tagged_field_overrunning_the_buffer() -> None:
    with pytest.raises(DecodeError):
        skip_tagged_fields(b"\x01\x00\x10abc", 0)
    assert skip_tagged_fields(b"\x02\x00\x01a\x05\x00", 0) == 6


def test_huge_array_count_in_a_message_fails_fast() -> None:
    """A Metadata v0 request claiming 2**31-1 topics in a few bytes: refused before any list is built."""
    with pytest.raises(DecodeError):
        MetadataRequest.decode(INT32.pack(2**31 - 1) + b"\x00\x01a", 0)
    with pytest.raises(DecodeError):  # the same in a flexible version, as a 5-byte varint
        MetadataRequest.decode(b"\xff\xff\xff\xff\x07" + bytes(8), 12)
    partition_v0 = struct.pack(">hiii", 0, 0, 0, 2**30)  # replica_nodes claims 2**30 int32s
    topic = INT16.pack(0) + INT16.pack(1) + b"t" + INT32.pack(1) + partition_v0
    with pytest.raises(DecodeError):
        MetadataResponse.decode(INT32.pack(0) + INT32.pack(1) + topic, 0)


def test_versions_outside_the_range_are_unsupported() -> None:
    with pytest.raises(UnsupportedVersion):
        MetadataRequest.decode(b"", 14)
    with pytest.raises(UnsupportedVersion):
        MetadataRequest().encode(-1)
    with pytest.raises(UnsupportedVersion):
        FetchRequest().encode(3)


def test_records_decode_as_a_zero_copy_view() -> None:
    batch = b"\x01" * 70
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=batch)])])
    for version in (3, 9, 11):
        frame = bytearray(request.encode(version))
        decoded = ProduceRequest.decode(frame, version)
        records = decoded.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview)
        assert records.obj is frame  # a slice of the input, not a copy
        assert not records.readonly  # the produce path patches base offsets in place
        assert bytes(records) == batch
    null_records = ProduceRequest(topic_data=[TopicProduceData(name="t", partition_data=[
        PartitionProduceData(index=0, records=None)])])
    decoded = ProduceRequest.decode(null_records.encode(9), 9)
    assert decoded.topic_data[0].partition_data[0].records is None


def test_value_types() -> None:
    topic_id = uuid.uuid4()
    request = MetadataRequest(topics=[MetadataRequestTopic(topic_id=topic_id, name=None)])
    decoded = MetadataRequest.decode(request.encode(12), 12)
    assert decoded.topics is not None
    assert decoded.topics[0].topic_id == topic_id
    assert isinstance(decoded.topics[0].topic_id, uuid.UUID)
    response = MetadataResponse(topics=[MetadataResponseTopic(name="t", partitions=[
        MetadataResponsePartition(replica_nodes=[1, 2], isr_nodes=[1])])])
    decoded_response = MetadataResponse.decode(response.encode(1), 1)
    assert decoded_response.topics[0].topic_id == uuid.UUID(int=0)
    assert decoded_response.topics[0].partitions[0].replica_nodes == [1, 2]


def test_null_topics_mean_all_topics_from_v1() -> None:
    assert MetadataRequest.decode(MetadataRequest(topics=None).encode(1), 1).topics is None
    with pytest.raises(DecodeError):  # v0 has no null array: an empty list meant "all"
        MetadataRequest.decode(INT32.pack(-1), 0)
