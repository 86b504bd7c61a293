"""StreamsGroupHeartbeat and StreamsGroupDescribe through an in-process broker: the broker creates the
topology's internal topics and hands out tasks; the group shows in ListGroups as a streams group, is not a
classic group for DescribeGroups, survives a restart, and is deleted only once empty."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from pybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from pybroker.protocol.messages.list_groups import ListGroupsRequest
from pybroker.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from pybroker.protocol.messages.streams_group_heartbeat import (
    KeyValue,
    StreamsGroupHeartbeatRequest,
    Subtopology,
    TopicInfo,
    Topology,
)
from tests.unit.broker.conftest import RawClient

GROUP = "app"
TOPOLOGY = Topology(epoch=0, subtopologies=[
    Subtopology(subtopology_id="0", source_topics=["orders"], source_topic_regex=[], state_changelog_topics=[],
                repartition_sink_topics=["app-rep"], repartition_source_topics=[], copartition_groups=[]),
    Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[], repartition_sink_topics=[],
                state_changelog_topics=[TopicInfo(name="app-store-changelog", partitions=0, replication_factor=0,
                                                  topic_configs=[KeyValue(key="cleanup.policy", value="compact")])],
                repartition_source_topics=[TopicInfo(name="app-rep", partitions=0, replication_factor=0,
                                                     topic_configs=[])], copartition_groups=[]),
])


def join(member: str) -> StreamsGroupHeartbeatRequest:
    return StreamsGroupHeartbeatRequest(
        group_id=GROUP, member_id=member, member_epoch=0, endpoint_information_epoch=0, rebalance_timeout_ms=30_000,
        topology=TOPOLOGY, active_tasks=[], standby_tasks=[], warmup_tasks=[], process_id=f"p-{member}",
        client_tags=[], task_offsets=[], task_end_offsets=[])


def beat(member: str, epoch: int) -> StreamsGroupHeartbeatRequest:
    return StreamsGroupHeartbeatRequest(group_id=GROUP, member_id=member, member_epoch=epoch,
                                        endpoint_information_epoch=0)


async def _topic(client: RawClient, name: str, partitions: int) -> None:
    answer = await client.call(CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=5000), 4)
    assert answer.topics[0].error_code == 0


async def test_the_broker_makes_the_internal_topics_and_assigns_the_tasks(app: BrokerApp, client: RawClient) -> None:
    missing = await client.call(join("m1"), 0)
    # a new group waits group.streams.initial.rebalance.delay.ms (3 s) for more members (5), and a source is missing (1)
    assert missing.error_code == 0 and [s.status_code for s in missing.status] == [5, 1]
    await _topic(client, "orders", 3)
    epoch = missing.member_epoch
    answers = []

    async def assigned() -> bool:
        answer = await client.call(beat("m1", epoch), 0)
        answers.append(answer)
        return answer.active_tasks is not None and len(answer.active_tasks) == 2

    # the first heartbeat after the source appears asks for the internal topics; a later one gets the tasks
    deadline = time.monotonic() + 60
    while not await assigned():
        assert time.monotonic() < deadline, answers[-1]
        epoch = answers[-1].member_epoch
        await asyncio.sleep(0.01)
    got = answers[-1]
    assert got.status == [] and {(t.subtopology_id, tuple(t.partitions)) for t in got.active_tasks} == \
        {("0", (0, 1, 2)), ("1", (0, 1, 2))}
    topics = app.state.logs.topics()
    assert topics["app-rep"].num_partitions == 3 and topics["app-store-changelog"].num_partitions == 3
    assert topics["app-store-changelog"].configs.get("cleanup.policy") == "compact"

    described = (await client.call(StreamsGroupDescribeRequest(group_ids=[GROUP, "nope"],
                                                               include_authorized_operations=False), 0)).groups
    assert [g.error_code for g in described] == [0, ErrorCode.GROUP_ID_NOT_FOUND]
    assert described[0].group_state == "Stable" and described[0].members[0].process_id == "p-m1"
    changelog = described[0].topology.subtopologies[1].state_changelog_topics[0]
    assert (changelog.name, changelog.partitions) == ("app-store-changelog", 3)
    listed = (await client.call(ListGroupsRequest(types_filter=["streams"]), 5)).groups
    assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [(GROUP, "streams", "Stable")]
    classic = (await client.call(DescribeGroupsRequest(groups=[GROUP]), 6)).groups[0]
    assert classic.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert classic.error_message == f"Group {GROUP} is not a classic group."
    busy = (await client.call(DeleteGroupsRequest(groups_names=[GROUP]), 2)).results[0]
    assert busy.error_code == ErrorCode.NON_EMPTY_GROUP
    left = await client.call(beat("m1", -1), 0)
    assert left.error_code == 0
    gone = (await client.call(DeleteGroupsRequest(groups_names=[GROUP]), 2)).results[0]
    assert gone.error_code == 0


async def test_a_streams_group_survives_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                "offsets.topic.num.partitions": "1", "group.streams.initial.rebalance.delay.ms": "0"})
    broker = BrokerApp(config)
    await broker.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.bound_ports[0])
        client = RawClient(reader, writer)
        for name in ("orders", "app-rep", "app-store-changelog"):
            await _topic(client, name, 2)
        joined = await client.call(join("m1"), 0)
        assert joined.error_code == 0 and joined.active_tasks
        client.close()
    finally:
        await broker.stop()
    broker = BrokerApp(BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                          "offsets.topic.num.partitions": "1", "group.streams.initial.rebalance.delay.ms": "0"}))
    await broker.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.bound_ports[0])
        client = RawClient(reader, writer)
        answers = []

        async def loaded() -> bool:
            answers.append(await client.call(beat("m1", joined.member_epoch), 0))
            return answers[-1].error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

        deadline = time.monotonic() + 60
        while not await loaded():
            assert time.monotonic() < deadline, "the offsets topic did not load"
            await asyncio.sleep(0.05)
        assert answers[-1].error_code == 0 and answers[-1].member_epoch == joined.member_epoch
        described = (await client.call(StreamsGroupDescribeRequest(group_ids=[GROUP],
                                                                   include_authorized_operations=False), 0)).groups[0]
        assert described.group_epoch >= 1 and [m.member_id for m in described.members] == ["m1"]
        assert {(t.subtopology_id, tuple(t.partitions)) for t in described.members[0].assignment.active_tasks} == \
            {(t.subtopology_id, tuple(t.partitions)) for t in joined.active_tasks}
        client.close()
    finally:
        await broker.stop()


async def test_version_1_names_the_assignor_and_stores_no_topology_description(app: BrokerApp,
                                                                                client: RawClient) -> None:
    """Kafka 4.4's v1 (KIP-1331), as Kafka 4.4 answers it without a topology description plugin (measured on
    Kafka 4.4.0): a heartbeat carries the acceptable recovery lag (10,000) and never asks for a description,
    a describe names the "sticky" assignor and reports the description NOT_STORED when asked for, and a
    pushed description is refused UNSUPPORTED_VERSION."""
    from pybroker.protocol.messages import streams_group_topology_description_update as u

    await _topic(client, "orders", 1)
    joined = await client.call(join("m1"), 1)
    assert joined.error_code == 0 and joined.acceptable_recovery_lag == 10_000
    assert joined.topology_description_required is False
    refused = await client.call(beat("nobody", 3), 1)
    assert refused.error_code != 0 and refused.acceptable_recovery_lag == -1
    for include, status in ((False, 0), (True, 1)):
        described = (await client.call(StreamsGroupDescribeRequest(
            group_ids=[GROUP, "nope"], include_authorized_operations=False, include_topology_description=include),
            1)).groups
        assert [(g.assignor_name, g.topology_description_status, g.topology_description) for g in described] == \
            [("sticky", status, None), (None, 0, None)]
    pushed = await client.call(u.StreamsGroupTopologyDescriptionUpdateRequest(
        group_id=GROUP, member_id="m1", topology_epoch=0, topology_description=u.TopologyDescription()), 0)
    assert pushed.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert pushed.error_message == "The broker has no streams group topology description plugin configured."
