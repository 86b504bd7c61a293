"""The cluster admin APIs a single node honours (issue 15), through stock admin clients against a real broker.

kafka-python 3's admin: describe_cluster, describe_topic_partitions (paging with the cursor), elect_leaders,
alter/list_partition_reassignments, describe_metadata_quorum, list_config_resources, and broker-logger
configs (describe_configs / incremental alter_configs). confluent-kafka (librdkafka 2.x): describe_cluster,
describe_topics, elect_leaders (librdkafka has no broker-logger resource type, so its admin cannot
reach the logger levels).
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import ElectionType
from confluent_kafka import TopicCollection as CkTopics
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, kp_admin

NODE = "1"


def test_kafka_python_describe_cluster_and_quorum(broker: BrokerProcess) -> None:
    with kp_admin(broker.bootstrap) as admin:
        cluster = admin.describe_cluster()
        quorum = admin.describe_metadata_quorum()
    assert cluster["controller_id"] == 1 and cluster["cluster_id"]
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, int(broker.bootstrap.rsplit(":", 1)[1]))]
    partition = quorum["topics"][0]["partitions"][0]
    assert partition["leader_id"] == 1 and partition["leader_epoch"] >= 1
    assert [v["replica_id"] for v in partition["current_voters"]] == [1] and partition["observers"] == []
    # the live metadata log's end: its first snapshot holds at least the feature levels
    assert partition["high_watermark"] > 0
    assert [v["log_end_offset"] for v in partition["current_voters"]] == [partition["high_watermark"]]


def test_kafka_python_describe_topic_partitions_pages(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 5, 1)])
        seen: list[int] = []
        cursor = None
        for _ in range(10):
            page = admin.describe_topic_partitions([topic], response_partition_limit=2, cursor=cursor)
            [entry] = page["topics"]
            assert entry["name"] == topic and entry["error_code"] == 0
            seen += [p["partition_index"] for p in entry["partitions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert seen == [0, 1, 2, 3, 4]


def test_kafka_python_elect_leaders_and_reassignments(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        response = admin.elect_leaders(0, {topic: [0, 1]})  # ELECTION_NOT_NEEDED is not an error to it
        codes = [p.error_code for r in response.replica_election_results for p in r.partition_result]
        assert codes == [84, 84]
        moved = admin.alter_partition_reassignments({TopicPartition(topic, 0): [1], TopicPartition(topic, 1): [1, 2]})
        assert moved[TopicPartition(topic, 0)] is None
        refused = moved[TopicPartition(topic, 1)]
        assert refused is not None and getattr(refused, "errno", None) == 39
        assert admin.list_partition_reassignments() == {}


def test_kafka_python_list_config_resources_and_logger_levels(broker: BrokerProcess,
                                                               new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        listed = admin.list_config_resources()
        assert topic in listed["topic"] and listed["broker"] == [NODE] and listed["broker_logger"] == [NODE]
        assert admin.list_config_resources(["BROKER_LOGGER"]) == {"broker_logger": [NODE]}
        loggers = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, NODE)],
                                         config_filter="all")
        levels = {k: v["value"] for k, v in loggers["broker_logger"][NODE].items()}
        assert levels["root"] == "INFO" and levels["pybroker.connection"] == "INFO"
        result = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, NODE,
                                                     configs={"pybroker.connection": "DEBUG"})],
                                     incremental=True)
        assert result == {"broker_logger": {NODE: "OK"}}
        loggers = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, NODE,
                                                         configs={"pybroker.connection": None})],
                                         config_filter="all")
        assert loggers["broker_logger"][NODE]["pybroker.connection"]["value"] == "DEBUG"
        bad = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, NODE, configs={"root": "LOUD"})],
                                  incremental=True, raise_on_unknown=False)
        assert "InvalidConfigurationError" in bad["broker_logger"][NODE]
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, NODE,
                                            configs={"pybroker.connection": None})], incremental=True)


def test_confluent_describe_cluster_topics_and_elect_leaders(broker: BrokerProcess,
                                                              new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with kp_admin(broker.bootstrap) as kp:
        kp.create_topics([NewTopic(topic, 3, 1)])
    admin = ck_admin(broker.bootstrap)
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=10).result(timeout=15)
    assert cluster.controller.id == 1 and [n.id for n in cluster.nodes] == [1] and cluster.cluster_id
    assert cluster.authorized_operations
    described = admin.describe_topics(CkTopics([topic]), include_authorized_operations=True,
                                      request_timeout=10)[topic].result(timeout=15)
    assert described.name == topic and [p.id for p in described.partitions] == [0, 1, 2]
    assert all(p.leader.id == 1 and [r.id for r in p.isr] == [1] for p in described.partitions)
    # (confluent-kafka 2.16's elect_leaders fails on any keyword argument: none given)
    elected = admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(topic, 0)]).result(timeout=15)
    error = elected[CkTopicPartition(topic, 0)]
    assert error is not None and "ELECTION_NOT_NEEDED" in error.name()
