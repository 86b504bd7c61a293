"""Share group membership survives `kill -9` (KIP-932's records in `__consumer_offsets`).

A pybroker subprocess; two members join a share group over the wire and heartbeat; the broker is killed
with SIGKILL (every heartbeat's records were fsynced before its answer) and started again. Then
ShareGroupDescribe shows the group with its epochs, members and assignments as they were; a member that
heartbeats with its epoch carries on, one with the epoch before the last is accepted too (Kafka's rule),
an older one is fenced; a member that left stays gone, and a deleted group's tombstones keep it deleted.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from pybroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from pybroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.integration.brokers import BrokerProcess
from tests.unit.broker.conftest import RawClient

RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


async def _client(broker: BrokerProcess) -> RawClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    return RawClient(reader, writer)


async def _retrying(client: RawClient, request: Any, version: int, code_of: Any) -> Any:
    """Call until the answer is not a coordinator-loading code (a restarted broker reads its logs first)."""
    deadline = time.monotonic() + 60
    while True:
        answer = await client.call(request, version)
        if code_of(answer) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.05)


async def _beat(client: RawClient, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return await _retrying(client, ShareGroupHeartbeatRequest(group_id="sg", member_id=member, member_epoch=epoch,
                                                              subscribed_topic_names=topics), 1,
                           lambda a: a.error_code)


async def _describe(client: RawClient, group: str = "sg") -> Any:
    answer = await _retrying(client, ShareGroupDescribeRequest(group_ids=[group]), 1,
                             lambda a: a.groups[0].error_code)
    return answer.groups[0]


def _shape(group: Any) -> tuple[Any, ...]:
    return (group.group_state, group.group_epoch, group.assignment_epoch, sorted(
        (m.member_id, m.member_epoch, m.client_id, m.subscribed_topic_names,
         [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions]) for m in group.members))


async def test_membership_survives_kill_9(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", {"offsets.topic.num.partitions": "2",
                                                 "share.coordinator.state.topic.num.partitions": "1"}).start()
    try:
        client = await _client(broker)
        create = CreateTopicsRequest(topics=[CreatableTopic(name=n, num_partitions=2, replication_factor=1)
                                             for n in ("sq", "other")])
        assert [t.error_code for t in (await client.call(create, 7)).topics] == [0, 0]
        one = await _beat(client, "m1", 0, ["sq"])
        two = await _beat(client, "m2", 0, ["sq", "other"])
        three = await _beat(client, "m3", 0, ["sq"])
        assert (one.error_code, two.error_code, three.error_code) == (0, 0, 0)
        m1 = await _beat(client, "m1", one.member_epoch)  # m1 catches up with the group epoch
        assert m1.error_code == 0 and m1.member_epoch > one.member_epoch
        left = await _beat(client, "m3", -1)
        assert left.error_code == 0
        before = _shape(await _describe(client))
        client.close()

        broker.restart(kill=True)

        client = await _client(broker)
        after = await _describe(client)
        assert after.error_code == 0 and _shape(after) == before
        assert {m.member_id for m in after.members} == {"m1", "m2"}
        # m1 heartbeats on with its epoch, as if nothing happened (and moves to the epoch m3's leaving made)
        again = await _beat(client, "m1", m1.member_epoch)
        assert (again.error_code, again.member_epoch) == (0, after.group_epoch)
        # its assignment is answered only if m3's leaving moved it: the simple assignor shares sq among m1, m2
        now = {m.member_id: m for m in (await _describe(client)).members}["m1"]
        target = [(t.topic_id, t.partitions) for t in now.assignment.topic_partitions]
        last_sent = (m1.assignment or one.assignment).topic_partitions  # an answer without one: unchanged
        earlier = [(t.topic_id, t.partitions) for t in last_sent]
        sent = [(t.topic_id, t.partitions) for t in again.assignment.topic_partitions] if again.assignment else None
        assert sent == (None if target == earlier else target)
        # m2 last heard its join epoch: it is moved to the group's epoch
        moved = await _beat(client, "m2", two.member_epoch)
        assert moved.error_code == 0 and moved.member_epoch == after.group_epoch
        # an epoch older than the one before the last is fenced, as Kafka fences it
        stale = await _beat(client, "m1", one.member_epoch)
        assert stale.error_code == ErrorCode.FENCED_MEMBER_EPOCH
        # the member that left stays gone
        assert (await _beat(client, "m3", three.member_epoch)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # everyone leaves, the group is deleted: its tombstones keep it deleted across another crash
        for member, epoch in (("m1", -1), ("m2", -1)):
            assert (await _beat(client, member, epoch)).error_code == 0
        deleted = await client.call(DeleteGroupsRequest(groups_names=["sg"]), 2)
        assert deleted.results[0].error_code == 0
        client.close()

        broker.restart(kill=True)

        client = await _client(broker)
        gone = await _describe(client)
        assert gone.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        client.close()
    finally:
        broker.close()
