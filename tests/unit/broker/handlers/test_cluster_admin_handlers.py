"""The cluster admin APIs a single node can honour (issue 15), through the real server and our codecs:
DescribeCluster, DescribeTopicPartitions (pagination edges), ElectLeaders, Alter/ListPartitionReassignments,
DescribeQuorum, ListConfigResources, and hostile requests to each."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import (
    alter_partition_reassignments as apr,
)
from pybroker.protocol.messages import (
    create_partitions,
    describe_cluster,
    describe_quorum,
    elect_leaders,
    list_config_resources,
    list_partition_reassignments,
)
from pybroker.protocol.messages import describe_topic_partitions as dtp
from tests.unit.broker.conftest import RawClient

E = ErrorCode


# -- DescribeCluster -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1, 2])
async def test_describe_cluster_lists_this_node_on_the_listener_asked(app: BrokerApp, client: RawClient,
                                                                      version: int) -> None:
    response = await client.call(describe_cluster.DescribeClusterRequest(
        include_cluster_authorized_operations=True, include_fenced_brokers=True), version)
    state = app.state
    assert response.error_code == E.NONE
    assert response.cluster_id == state.cluster_id and response.controller_id == state.node_id
    [broker] = response.brokers
    assert (broker.broker_id, broker.host, broker.port, broker.is_fenced) == (
        state.node_id, "127.0.0.1", app.bound_ports[0], False)
    assert response.cluster_authorized_operations > 0  # no authorizer: every cluster operation


async def test_describe_cluster_without_operations_leaves_the_bit_set_unset(client: RawClient) -> None:
    response = await client.call(describe_cluster.DescribeClusterRequest(), 1)
    assert response.cluster_authorized_operations == -(2**31)


@pytest.mark.parametrize(("endpoint_type", "code"), [(2, E.MISMATCHED_ENDPOINT_TYPE), (7, E.UNSUPPORTED_ENDPOINT_TYPE),
                                                      (-1, E.UNSUPPORTED_ENDPOINT_TYPE)])
async def test_describe_cluster_of_controllers_or_an_unknown_type_is_refused(client: RawClient, endpoint_type: int,
                                                                            code: int) -> None:
    response = await client.call(describe_cluster.DescribeClusterRequest(endpoint_type=endpoint_type), 1)
    assert response.error_code == code and response.error_message and response.brokers == []


# -- DescribeTopicPartitions ---------------------------------------------------------------------
async def _dtp(client: RawClient, names: list[str], limit: int = 2000,
               cursor: tuple[str, int] | None = None) -> dtp.DescribeTopicPartitionsResponse:
    request = dtp.DescribeTopicPartitionsRequest(
        topics=[dtp.TopicRequest(name=n) for n in names], response_partition_limit=limit,
        cursor=None if cursor is None else dtp.DescribeTopicPartitionsRequestCursor(topic_name=cursor[0],
                                                                                   partition_index=cursor[1]))
    response: dtp.DescribeTopicPartitionsResponse = await client.call(request, 0)
    return response


def _pages(response: dtp.DescribeTopicPartitionsResponse) -> list[tuple[str | None, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


async def test_describe_topic_partitions_lists_named_topics_in_name_order_with_ids(app: BrokerApp,
                                                                                   client: RawClient) -> None:
    b = app.state.topics.create("b-topic", 2, 1, {})
    a = app.state.topics.create("a-topic", 1, 1, {})
    response = await _dtp(client, ["b-topic", "a-topic", "b-topic", "missing", "bad name!"])
    assert _pages(response) == [("a-topic", [0]), ("b-topic", [0, 1]), ("bad name!", []), ("missing", [])]
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {"a-topic": 0, "b-topic": 0, "missing": E.UNKNOWN_TOPIC_OR_PARTITION,
                     "bad name!": E.INVALID_TOPIC_EXCEPTION}
    ids = {t.name: t.topic_id for t in response.topics}
    assert ids["a-topic"] == a.topic_id and ids["b-topic"] == b.topic_id and ids["missing"] == uuid.UUID(int=0)
    node = app.state.node_id
    part = response.topics[1].partitions[1]
    assert (part.leader_id, part.replica_nodes, part.isr_nodes, part.offline_replicas) == (node, [node], [node], [])
    # empty, as Kafka sends them: the Java admin client (kafka-topics --describe) fails on null lists
    assert part.eligible_leader_replicas == [] and part.last_known_elr == []
    assert response.next_cursor is None
    assert response.topics[0].topic_authorized_operations > 0


async def test_describe_topic_partitions_pages_through_every_topic_with_the_cursor(app: BrokerApp,
                                                                                   client: RawClient) -> None:
    for name, count in (("p-a", 3), ("p-b", 2), ("p-c", 4)):
        app.state.topics.create(name, count, 1, {})
    seen: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    pages = 0
    while True:
        response = await _dtp(client, [], limit=2, cursor=cursor)
        pages += 1
        got = [(t.name or "", p.partition_index) for t in response.topics for p in t.partitions]
        assert len(got) <= 2
        seen += got
        if response.next_cursor is None:
            break
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
        assert pages < 20
    expected = [(n, i) for n, c in (("p-a", 3), ("p-b", 2), ("p-c", 4)) for i in range(c)]
    assert [s for s in seen if s[0].startswith("p-")] == expected


async def test_a_topic_ending_exactly_at_the_limit_points_the_cursor_at_the_next_topic(app: BrokerApp,
                                                                                      client: RawClient) -> None:
    app.state.topics.create("x-one", 2, 1, {})
    app.state.topics.create("x-two", 1, 1, {})
    response = await _dtp(client, ["x-one", "x-two"], limit=2)
    assert _pages(response) == [("x-one", [0, 1])]
    assert response.next_cursor is not None
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("x-two", 0)


async def test_the_brokers_page_cap_wins_over_a_larger_request(tmp_path: Path) -> None:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                "max.request.partition.size.limit": "1"})
    broker = BrokerApp(config)
    await broker.start()
    try:
        broker.state.topics.create("capped", 2, 1, {})
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.bound_ports[0])
        client = RawClient(reader, writer)
        try:
            response = await _dtp(client, ["capped"], limit=2000)
        finally:
            client.close()
    finally:
        await broker.stop()
    assert _pages(response) == [("capped", [0])]
    assert response.next_cursor is not None and response.next_cursor.partition_index == 1


async def test_describe_topic_partitions_cursor_edges(app: BrokerApp, client: RawClient) -> None:
    app.state.topics.create("c-topic", 3, 1, {})
    # a cursor past the last partition lists the topic with no partitions and ends
    response = await _dtp(client, ["c-topic"], cursor=("c-topic", 99))
    assert _pages(response) == [("c-topic", [])] and response.next_cursor is None
    # a negative start index is read as 0
    response = await _dtp(client, ["c-topic"], cursor=("c-topic", -5), limit=1)
    assert _pages(response) == [("c-topic", [0])]
    assert response.next_cursor is not None and response.next_cursor.partition_index == 1
    # a cursor naming a topic not in the list: every named topic refused
    response = await _dtp(client, ["c-topic"], cursor=("zzz", 0))
    assert [(t.name, t.error_code) for t in response.topics] == [("c-topic", E.INVALID_REQUEST)]
    # a limit of 0 lists nothing and points at the first topic; a negative one lists nothing at all
    response = await _dtp(client, ["c-topic"], limit=0)
    assert response.topics == [] and response.next_cursor is not None
    assert response.next_cursor.topic_name == "c-topic"
    response = await _dtp(client, ["c-topic"], limit=-(2**31))
    assert response.topics == [] and response.next_cursor is None


async def test_describe_topic_partitions_survives_many_repeated_names(app: BrokerApp, client: RawClient) -> None:
    app.state.topics.create("many", 1, 1, {})
    response = await _dtp(client, ["many"] * 50_000 + [f"n{i}" for i in range(3)])
    assert [t.name for t in response.topics] == ["many", "n0", "n1", "n2"]


# -- ElectLeaders ------------------------------------------------------------------------------------
async def test_create_partitions_that_do_not_grow_get_kafkas_texts(app: BrokerApp, client: RawClient) -> None:
    """kafka-topics --alter prints the controller's text as it is: Kafka 4's words, compared with Kafka's own
    output in tests/kafka_tools/test_admin_tools.py."""
    app.state.topics.create("cp", 3, 1, {})
    answers = {}
    for count in (2, 3):
        response = await client.call(create_partitions.CreatePartitionsRequest(topics=[
            create_partitions.CreatePartitionsTopic(name="cp", count=count, assignments=None)],
            timeout_ms=1000, validate_only=False), 3)
        answers[count] = (response.results[0].error_code, response.results[0].error_message)
    assert answers == {2: (E.INVALID_PARTITIONS, "The topic cp currently has 3 partition(s); 2 would not be an increase."),
                       3: (E.INVALID_PARTITIONS, "Topic already has 3 partition(s).")}


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_elect_leaders_needs_no_election_on_a_single_replica(app: BrokerApp, client: RawClient,
                                                                   version: int) -> None:
    app.state.topics.create("el", 2, 1, {})
    response = await client.call(elect_leaders.ElectLeadersRequest(election_type=0, topic_partitions=[
        elect_leaders.TopicPartitions(topic="el", partitions=[0, 1, 5]),
        elect_leaders.TopicPartitions(topic="nope", partitions=[0])]), version)
    results = {(r.topic, p.partition_id): (p.error_code, p.error_message)
               for r in response.replica_election_results for p in r.partition_result}
    not_needed = "Leader election not needed for topic partition."  # the text Kafka 4.4 sends with it
    assert results == {("el", 0): (E.ELECTION_NOT_NEEDED, not_needed), ("el", 1): (E.ELECTION_NOT_NEEDED, not_needed),
                       ("el", 5): (E.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as el-5"),
                       ("nope", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")}


async def test_elect_leaders_for_every_partition_lists_topics_without_partitions(app: BrokerApp,
                                                                                 client: RawClient) -> None:
    app.state.topics.create("el-all", 3, 1, {})
    response = await client.call(elect_leaders.ElectLeadersRequest(election_type=1, topic_partitions=None), 2)
    assert response.error_code == E.NONE
    assert ("el-all", []) in [(r.topic, r.partition_result) for r in response.replica_election_results]


async def test_elect_leaders_refuses_an_unknown_type_and_an_excessive_request(app: BrokerApp,
                                                                             client: RawClient) -> None:
    response = await client.call(elect_leaders.ElectLeadersRequest(election_type=9, topic_partitions=[
        elect_leaders.TopicPartitions(topic="el", partitions=[0])]), 2)
    assert response.error_code == E.INVALID_REQUEST
    assert response.replica_election_results[0].partition_result[0].error_code == E.INVALID_REQUEST
    response = await client.call(elect_leaders.ElectLeadersRequest(election_type=0, topic_partitions=[
        elect_leaders.TopicPartitions(topic="el", partitions=list(range(10_001)))]), 2)
    assert response.error_code == E.POLICY_VIOLATION


# -- partition reassignments -------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1])
async def test_a_reassignment_to_this_node_is_a_no_op_and_others_are_refused(app: BrokerApp, client: RawClient,
                                                                             version: int) -> None:
    app.state.topics.create("ra", 1, 1, {})
    node = app.state.node_id
    cases = {0: [node], 1: [node, 99], 2: [], 3: [node, node], 4: None}
    response = await client.call(apr.AlterPartitionReassignmentsRequest(topics=[
        apr.ReassignableTopic(name="ra", partitions=[apr.ReassignablePartition(partition_index=0, replicas=r)
                                                     for r in cases.values()]),
        apr.ReassignableTopic(name="ra-missing", partitions=[apr.ReassignablePartition(partition_index=0,
                                                                                       replicas=[node])])]),
        version)
    assert response.error_code == E.NONE
    got = [(p.error_code, p.error_message) for t in response.responses for p in t.partitions]
    assert got[0] == (E.NONE, None)
    assert got[1] == (E.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes broker 99, but no such broker is registered.")
    assert got[2][0] == got[3][0] == E.INVALID_REPLICA_ASSIGNMENT and got[2][1] and got[3][1]
    assert got[4][0] == E.NO_REASSIGNMENT_IN_PROGRESS
    assert got[5][0] == E.UNKNOWN_TOPIC_OR_PARTITION
    listed = await client.call(list_partition_reassignments.ListPartitionReassignmentsRequest(topics=None), 0)
    assert (listed.error_code, listed.topics) == (E.NONE, [])


async def test_an_excessive_reassignment_is_refused_whole(client: RawClient) -> None:
    response = await client.call(apr.AlterPartitionReassignmentsRequest(topics=[apr.ReassignableTopic(
        name="ra", partitions=[apr.ReassignablePartition(partition_index=i, replicas=[1]) for i in range(10_001)])]),
        1)
    assert response.error_code == E.POLICY_VIOLATION and response.responses == []


# -- DescribeQuorum ------------------------------------------------------------------------------------
def _quorum_request(topic: str = "__cluster_metadata", partitions: tuple[int, ...] = (0,)) -> Any:
    return describe_quorum.DescribeQuorumRequest(topics=[describe_quorum.DescribeQuorumRequestTopicData(
        topic_name=topic, partitions=[describe_quorum.DescribeQuorumRequestPartitionData(partition_index=p)
                                      for p in partitions])])


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_describe_quorum_is_this_node_alone(app: BrokerApp, client: RawClient, version: int) -> None:
    response = await client.call(_quorum_request(), version)
    node = app.state.node_id
    assert response.error_code == E.NONE
    [partition] = response.topics[0].partitions
    assert (partition.leader_id, partition.leader_epoch, partition.observers) == (node, 1, [])
    [voter] = partition.current_voters
    assert voter.replica_id == node and voter.log_end_offset == partition.high_watermark
    if version >= 1:
        assert voter.last_fetch_timestamp == -1 and voter.last_caught_up_timestamp > 0
    if version >= 2:
        assert voter.replica_directory_id != uuid.UUID(int=0)
        [entry] = response.nodes
        assert entry.node_id == node and entry.listeners[0].port == app.bound_ports[0]


@pytest.mark.parametrize("request_", [_quorum_request("other"), _quorum_request(partitions=(1,)),
                                      _quorum_request(partitions=(0, 0))])
async def test_describe_quorum_of_anything_else_is_an_unknown_partition(client: RawClient, request_: Any) -> None:
    response = await client.call(request_, 2)
    assert response.error_code == E.UNKNOWN_TOPIC_OR_PARTITION and response.topics == []


async def test_describe_quorum_of_nothing_answers_nothing(client: RawClient) -> None:
    """As Kafka 4.4 (tests/conformance: api/DescribeQuorum): no topics asked, none answered, no error."""
    response = await client.call(describe_quorum.DescribeQuorumRequest(topics=[]), 2)
    assert response.error_code == E.NONE and response.topics == []


# -- ListConfigResources --------------------------------------------------------------------------------
async def test_list_config_resources_lists_topics_broker_and_loggers(app: BrokerApp, client: RawClient) -> None:
    app.state.topics.create("lcr", 1, 1, {})
    node = str(app.state.node_id)
    response = await client.call(list_config_resources.ListConfigResourcesRequest(resource_types=[]), 1)
    got = {(r.resource_type, r.resource_name) for r in response.config_resources}
    assert {(2, "lcr"), (4, node), (8, node)} <= got
    response = await client.call(list_config_resources.ListConfigResourcesRequest(resource_types=[8]), 1)
    assert [(r.resource_type, r.resource_name) for r in response.config_resources] == [(8, node)]
    v0 = await client.call(list_config_resources.ListConfigResourcesRequest(), 0)  # client metrics only
    assert v0.error_code == E.NONE and all(r.resource_type == 16 for r in v0.config_resources)
    bad = await client.call(list_config_resources.ListConfigResourcesRequest(resource_types=[2, 3]), 1)
    assert bad.error_code == E.UNSUPPORTED_VERSION and bad.config_resources == []
