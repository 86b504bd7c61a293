"""Error paths of the classic consumer group protocol: unknown groups, wrong generations and member ids,
invalid session timeouts, inconsistent protocols. The member joins as a consumer does (JoinGroup v5: first
MEMBER_ID_REQUIRED with the member id to use, then the join proper), each side with its own member id.
"""

from __future__ import annotations

from typing import Any

from pybroker.protocol.messages.heartbeat import HeartbeatRequest
from pybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from pybroker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pybroker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from pybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.conformance.error_paths import topic_of
from tests.conformance.registry import scenario
from tests.conformance.side import Side

FAMILY = "group_errors"


def join_request(side: Side, member_id: str = "", session_timeout_ms: int = 10_000,
                 protocol_type: str = "consumer") -> JoinGroupRequest:
    return JoinGroupRequest(group_id=side.name("g"), session_timeout_ms=session_timeout_ms,
                            rebalance_timeout_ms=10_000, member_id=member_id, protocol_type=protocol_type,
                            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")])


async def joined(side: Side) -> tuple[str, int]:
    """Join the scenario's group as its only member and sync; (member id, generation). Not compared."""
    first: Any = await side.raw(join_request(side), 5)
    answer: Any = await side.raw(join_request(side, first.member_id), 5)
    assert answer.error_code == 0, answer
    sync: Any = await side.raw(SyncGroupRequest(
        group_id=side.name("g"), generation_id=answer.generation_id, member_id=answer.member_id,
        assignments=[SyncGroupRequestAssignment(member_id=answer.member_id, assignment=b"\x00\x02")]), 3)
    assert sync.error_code == 0, sync
    return answer.member_id, answer.generation_id


@scenario("groups/join-member-id-required", FAMILY, "JoinGroup v5 without a member id, then with it")
async def _join(side: Side) -> None:
    first: Any = await side.call(join_request(side), 5)
    await side.call(join_request(side, first.member_id), 5)


@scenario("groups/join-invalid-session-timeout", FAMILY, "JoinGroup with a session timeout under the minimum "
          "and over the maximum")
async def _join_timeouts(side: Side) -> None:
    await side.call(join_request(side, session_timeout_ms=100), 5)
    await side.call(join_request(side, session_timeout_ms=10_000_000), 5)


@scenario("groups/join-inconsistent-protocol-type", FAMILY, "JoinGroup of a second member with another "
          "protocol type")
async def _join_inconsistent(side: Side) -> None:
    await joined(side)
    await side.call(join_request(side, protocol_type="connect"), 5)


@scenario("groups/heartbeat-unknown-group", FAMILY, "Heartbeat to a group that does not exist")
async def _heartbeat_unknown_group(side: Side) -> None:
    await side.call(HeartbeatRequest(group_id=side.name("g"), generation_id=1, member_id="nobody"), 4)


@scenario("groups/heartbeat-wrong-generation-and-member", FAMILY, "Heartbeat with the next generation, "
          "with an unknown member id, and right")
async def _heartbeat_wrong(side: Side) -> None:
    member, generation = await joined(side)
    await side.call(HeartbeatRequest(group_id=side.name("g"), generation_id=generation + 1, member_id=member), 4)
    await side.call(HeartbeatRequest(group_id=side.name("g"), generation_id=generation, member_id="nobody"), 4)
    await side.call(HeartbeatRequest(group_id=side.name("g"), generation_id=generation, member_id=member), 4)


@scenario("groups/sync-wrong-generation-and-member", FAMILY, "SyncGroup with the next generation and with an "
          "unknown member id")
async def _sync_wrong(side: Side) -> None:
    member, generation = await joined(side)
    await side.call(SyncGroupRequest(group_id=side.name("g"), generation_id=generation + 1, member_id=member), 3)
    await side.call(SyncGroupRequest(group_id=side.name("g"), generation_id=generation, member_id="nobody"), 3)


@scenario("groups/offset-commit-wrong-generation-and-member", FAMILY, "OffsetCommit v8 with the next "
          "generation, with an unknown member, and right")
async def _commit_wrong(side: Side) -> None:
    name = await topic_of(side)
    member, generation = await joined(side)
    topics = [OffsetCommitRequestTopic(name=name, partitions=[OffsetCommitRequestPartition(committed_offset=1)])]
    for gen, who in ((generation + 1, member), (generation, "nobody"), (generation, member)):
        await side.call(OffsetCommitRequest(group_id=side.name("g"), generation_id_or_member_epoch=gen,
                                            member_id=who, topics=topics), 8)


@scenario("groups/leave-unknown-member", FAMILY, "LeaveGroup v3 of an unknown member and of the member")
async def _leave(side: Side) -> None:
    member, _ = await joined(side)
    await side.call(LeaveGroupRequest(group_id=side.name("g"), members=[
        MemberIdentity(member_id="nobody"), MemberIdentity(member_id=member)]), 3)


@scenario("groups/offset-delete", FAMILY, "OffsetDelete of an unknown group, and of a subscribed topic's "
          "offsets while the group is active")
async def _offset_delete(side: Side) -> None:
    name = await topic_of(side)
    topics = [OffsetDeleteRequestTopic(name=name, partitions=[OffsetDeleteRequestPartition(0)])]
    await side.call(OffsetDeleteRequest(group_id=side.name("none"), topics=topics), 0)
    await side.call(OffsetDeleteRequest(group_id=side.name("g"), topics=topics), 0)
