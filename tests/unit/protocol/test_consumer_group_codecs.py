"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) against bytes built by hand from Kafka's message
spec (kafka-python has no classes for them to serve as the oracle): compact strings and arrays carry
length + 1 as an unsigned varint (0: null), every struct ends with its tagged fields (0: none)."""

from __future__ import annotations

import struct
import uuid

from pybroker.protocol.messages.consumer_group_describe import (
    ConsumerDescribedGroup,
    ConsumerDescribedMember,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    MemberAssignment,
)
from pybroker.protocol.messages.consumer_group_heartbeat import (
    AssignedTopicPartitions,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    HeartbeatTopicPartitions,
)

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")


def s(text: str | None) -> bytes:
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def test_heartbeat_request_v1_bytes() -> None:
    wire = (s("g") + s("m") + i32(3) + s(None) + s("r1") + i32(-1) + b"\x02" + s("t")
            + s("t.*") + s("uniform")
            + b"\x02" + TOPIC.bytes + b"\x03" + i32(0) + i32(2) + b"\x00"  # one topic, partitions [0, 2], no tags
            + b"\x00")
    request = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=3, rack_id="r1", rebalance_timeout_ms=-1,
        subscribed_topic_names=["t"], subscribed_topic_regex="t.*", server_assignor="uniform",
        topic_partitions=[HeartbeatTopicPartitions(topic_id=TOPIC, partitions=[0, 2])])
    assert request.encode(1) == wire
    assert ConsumerGroupHeartbeatRequest.decode(wire, 1) == request
    # v0 has no regex field: the same request without it
    v0 = wire.replace(s("t.*"), b"", 1)
    decoded = ConsumerGroupHeartbeatRequest.decode(v0, 0)
    assert decoded.subscribed_topic_regex is None and decoded.server_assignor == "uniform"


def test_heartbeat_request_nulls_mean_unchanged() -> None:
    wire = s("g") + s("m") + i32(5) + s(None) + s(None) + i32(-1) + b"\x00" + s(None) + s(None) + b"\x00" + b"\x00"
    decoded = ConsumerGroupHeartbeatRequest.decode(wire, 1)
    assert decoded.subscribed_topic_names is None and decoded.topic_partitions is None


def test_heartbeat_response_bytes() -> None:
    response = ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, member_id="m", member_epoch=2, heartbeat_interval_ms=5000,
        assignment=HeartbeatAssignment(topic_partitions=[AssignedTopicPartitions(topic_id=TOPIC, partitions=[1])]))
    wire = (i32(0) + b"\x00\x00" + s(None) + s("m") + i32(2) + i32(5000)
            + b"\x01"  # a present nullable struct
            + b"\x02" + TOPIC.bytes + b"\x02" + i32(1) + b"\x00" + b"\x00" + b"\x00")
    assert response.encode(0) == wire
    assert ConsumerGroupHeartbeatResponse.decode(wire, 0) == response
    empty = ConsumerGroupHeartbeatResponse(error_code=110, member_epoch=-1)
    assert empty.encode(1).endswith(b"\xff\xff\xff\xff" + i32(0) + b"\xff" + b"\x00")


def test_describe_bytes_and_member_type_from_v1() -> None:
    assert ConsumerGroupDescribeRequest(group_ids=["g"], include_authorized_operations=True).encode(0) == (
        b"\x02" + s("g") + b"\x01" + b"\x00")
    member = ConsumerDescribedMember(member_id="m", member_epoch=1, client_id="c", client_host="/h",
                                     subscribed_topic_names=["t"], assignment=MemberAssignment(),
                                     target_assignment=MemberAssignment(), member_type=1)
    response = ConsumerGroupDescribeResponse(groups=[ConsumerDescribedGroup(
        group_id="g", group_state="Stable", group_epoch=1, assignment_epoch=1, assignor_name="uniform",
        members=[member], authorized_operations=-(2**31))])
    v0, v1 = response.encode(0), response.encode(1)
    assert len(v1) == len(v0) + 1  # the member's int8 type
    assert ConsumerGroupDescribeResponse.decode(v1, 1) == response
    assert ConsumerGroupDescribeResponse.decode(v0, 0).groups[0].members[0].member_type == -1
