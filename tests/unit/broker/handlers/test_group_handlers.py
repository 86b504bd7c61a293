"""Every version of every group API through the in-process broker: the wire shapes each version needs.

The coordinator's rules are tested on their own (test_group_coordinator); here a whole group life runs
once per request version, so a field that exists, or may be null, only in some versions is exercised.
"""

from __future__ import annotations

import pytest

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from pybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from pybroker.protocol.messages.heartbeat import HeartbeatRequest
from pybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from pybroker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from pybroker.protocol.messages.list_groups import ListGroupsRequest
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
from pybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from pybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.unit.broker.conftest import RawClient

TOPIC = "t"


async def _topic(client: RawClient) -> None:
    request = CreateTopicsRequest(topics=[CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)],
                                  timeout_ms=5000)
    answer = await client.call(request, 4)
    assert answer.topics[0].error_code == 0


async def _join(client: RawClient, version: int, group: str) -> tuple[str, int]:
    request = JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                               member_id="", protocol_type="consumer",
                               protocols=[JoinGroupRequestProtocol(name="range", metadata=b"meta")])
    answer = await client.call(request, version)
    if version >= 4:
        assert answer.error_code == ErrorCode.MEMBER_ID_REQUIRED
        request.member_id = answer.member_id
        answer = await client.call(request, version)
    assert answer.error_code == ErrorCode.NONE
    assert answer.leader == answer.member_id and answer.generation_id == 1
    assert [(m.member_id, m.metadata) for m in answer.members] == [(answer.member_id, b"meta")]
    assert answer.protocol_name == "range"
    return answer.member_id, answer.generation_id


@pytest.mark.parametrize("version", range(10))
async def test_join_group_every_version(client: RawClient, version: int) -> None:
    await _join(client, version, f"join-v{version}")


@pytest.mark.parametrize("version", range(6))
async def test_sync_heartbeat_leave_every_version(client: RawClient, version: int) -> None:
    group = f"sync-v{version}"
    member, generation = await _join(client, 9, group)
    sync = await client.call(SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member, protocol_type="consumer",
        protocol_name="range", assignments=[SyncGroupRequestAssignment(member_id=member, assignment=b"mine")]),
        version)
    assert (sync.error_code, sync.assignment) == (ErrorCode.NONE, b"mine")
    beat = await client.call(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member),
                             min(version, 4))
    assert beat.error_code == ErrorCode.NONE
    stale = await client.call(HeartbeatRequest(group_id=group, generation_id=generation + 1, member_id=member),
                              min(version, 4))
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    leave = LeaveGroupRequest(group_id=group, member_id=member, members=[MemberIdentity(member_id=member)])
    left = await client.call(leave, version)
    assert left.error_code == ErrorCode.NONE
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, ErrorCode.NONE)]
    again = await client.call(leave, version)
    expected = ErrorCode.UNKNOWN_MEMBER_ID
    assert (again.members[0].error_code if version >= 3 else again.error_code) == expected


@pytest.mark.parametrize("version", range(10))
async def test_commit_and_fetch_every_version(client: RawClient, version: int) -> None:
    await _topic(client)
    group = f"offsets-v{version}"
    commit = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(name=TOPIC, partitions=[
            OffsetCommitRequestPartition(partition_index=0, committed_offset=41 + version, committed_metadata="m"),
            OffsetCommitRequestPartition(partition_index=9, committed_offset=1, committed_metadata=None)])])
    answer = await client.call(commit, version)
    # the unknown partition first, as Kafka 4.4 lists it (tests/conformance: more/offset-commit-simple-consumer)
    assert [(p.partition_index, p.error_code) for p in answer.topics[0].partitions] == [
        (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (0, ErrorCode.NONE)]
    if version >= 8:
        fetch = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=[
            OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1])])])
        got = await client.call(fetch, min(version, 9))
        partitions = got.groups[0].topics[0].partitions
    else:
        fetch = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(name=TOPIC,
                                                                                   partition_indexes=[0, 1])])
        got = await client.call(fetch, version)
        partitions = got.topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in partitions] == [
        (0, 41 + version, "m"), (1, -1, "")]


async def test_list_describe_delete_and_offset_delete(client: RawClient) -> None:
    await _topic(client)
    member, _ = await _join(client, 9, "busy")
    commit = OffsetCommitRequest(group_id="idle", generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(name=TOPIC, partitions=[
            OffsetCommitRequestPartition(partition_index=p, committed_offset=p, committed_metadata="")
            for p in (0, 1)])])
    await client.call(commit, 9)
    for version in range(6):
        listed = await client.call(ListGroupsRequest(), version)
        assert {g.group_id for g in listed.groups} >= {"busy", "idle"}
    only_empty = await client.call(ListGroupsRequest(states_filter=["empty"]), 4)
    assert {g.group_id for g in only_empty.groups} == {"idle"}
    for version in range(7):
        described = await client.call(DescribeGroupsRequest(groups=["busy", "nope"]), version)
        busy, nope = described.groups
        assert busy.group_state == "CompletingRebalance" and [m.member_id for m in busy.members] == [member]
        expected = ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else ErrorCode.NONE
        assert (nope.error_code, nope.group_state) == (expected, "Dead")
    removed = await client.call(OffsetDeleteRequest(group_id="idle", topics=[OffsetDeleteRequestTopic(
        name=TOPIC, partitions=[OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert removed.error_code == ErrorCode.NONE and removed.topics[0].partitions[0].error_code == ErrorCode.NONE
    for version in range(3):
        deleted = await client.call(DeleteGroupsRequest(groups_names=["busy", f"gone-{version}"]), version)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("busy", ErrorCode.NON_EMPTY_GROUP), (f"gone-{version}", ErrorCode.GROUP_ID_NOT_FOUND)]
    deleted = await client.call(DeleteGroupsRequest(groups_names=["idle"]), 2)
    assert deleted.results[0].error_code == ErrorCode.NONE


async def test_empty_group_id_is_invalid(client: RawClient) -> None:
    answer = await client.call(HeartbeatRequest(group_id="", generation_id=1, member_id="m"), 4)
    assert answer.error_code == ErrorCode.INVALID_GROUP_ID


async def test_snapshot_shows_groups_members_and_commits(client: RawClient, app: object) -> None:
    await _topic(client)
    await _join(client, 9, "snap")
    commit = OffsetCommitRequest(group_id="simple", generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(name=TOPIC, partitions=[
            OffsetCommitRequestPartition(partition_index=1, committed_offset=7, committed_metadata="")])])
    await client.call(commit, 9)
    snapshot = {g.group_id: g for g in app.state.groups.snapshot()}  # type: ignore[attr-defined]
    assert (snapshot["snap"].state, snapshot["snap"].members) == ("CompletingRebalance", 1)
    assert snapshot["simple"].committed == {(TOPIC, 1): 7}
