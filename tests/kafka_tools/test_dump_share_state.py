"""Kafka reads pybroker's `__share_group_state`: `kafka-dump-log --share-group-state-decoder` on a stopped
pybroker's share state segments, after librdkafka's share consumer accepted, released and rejected records;
and `--offsets-decoder` reads the share group's membership records in `__consumer_offsets`.

Kafka's own decoder must read every record (a key it cannot parse prints an error), and what it shows must
be what we wrote: the share-partition's key (group, topic id, partition) and, in the last snapshot, the
start offset past every accepted or rejected record.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_flush, ck_producer, close_clients
from tests.kafka_tools.runner import run

COUNT = 12


def _consume(bootstrap: str, topic: str, group: str) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    done = 0
    deadline = time.monotonic() + 60
    try:
        while done < COUNT:
            assert time.monotonic() < deadline, "the share consumer got too little"
            for msg in consumer.poll(0.2):
                number = int(msg.value().decode()[1:])
                consumer.acknowledge(msg, AcknowledgeType.REJECT if number == 3 else AcknowledgeType.ACCEPT)
                done += 1
            consumer.commit_sync(10)
    finally:
        consumer.close()


def _kafka_decodes_our_membership(broker: BrokerProcess, group: str) -> None:
    """`kafka-dump-log --offsets-decoder` reads the share group's records in `__consumer_offsets` (KIP-932's
    kinds 10-15): the member's metadata and assignments as we wrote them, then its tombstones (it left)."""
    segments = sorted((broker.log_dirs[0] / "__consumer_offsets-0").glob("*.log"))
    done = run("kafka-dump-log", "-", "--files", ",".join(map(str, segments)), "--offsets-decoder", "--print-data-log")
    assert done.code == 0, done.stderr
    assert "error" not in done.stdout.lower(), done.stdout
    records = [(json.loads(k), None if v == "<DELETE>" else json.loads(v))
               for k, v in re.findall(r"key: (\{.*?\}) payload: (\{.*\}|<DELETE>)$", done.stdout, re.MULTILINE)]
    kinds = {str(key["type"]) for key, _ in records if key["data"].get("groupId") == group}
    assert {"10", "11", "12", "13", "14", "15"} <= kinds, done.stdout
    members = [v["data"] for k, v in records if str(k["type"]) == "10" and v is not None]
    assert members and members[0]["subscribedTopicNames"] == ["shared"]
    current = [v["data"] for k, v in records if str(k["type"]) == "14" and v is not None]
    assert current and current[-1]["memberEpoch"] > 0 and current[-1]["assignedPartitions"][0]["partitions"] == [0]
    state = [v["data"] for k, v in records if str(k["type"]) == "15" and v is not None]
    assert state[-1]["initializedTopics"][0]["topicName"] == "shared"
    assert any(str(k["type"]) == "10" and v is None for k, v in records)  # the member left: its tombstone


def test_kafka_decodes_our_share_state(kafka_ready: None, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", {"share.coordinator.state.topic.num.partitions": "1",
                                                 "offsets.topic.num.partitions": "1"})
    broker.start()
    group = f"dump-share-{uuid.uuid4().hex[:6]}"
    try:
        admin = ck_admin(broker.bootstrap)
        admin.create_topics([NewTopic("shared", num_partitions=1, replication_factor=1)])["shared"].result(10)
        resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(10)
        producer = ck_producer(broker.bootstrap)
        for i in range(COUNT):
            producer.produce("shared", value=f"v{i}".encode())
        ck_flush(producer)
        _consume(broker.bootstrap, "shared", group)
        close_clients()  # before the broker goes, or they log connection errors
        broker.stop()
        segments = sorted((broker.log_dirs[0] / "__share_group_state-0").glob("*.log"))
        done = run("kafka-dump-log", "-", "--files", ",".join(map(str, segments)), "--share-group-state-decoder",
                   "--print-data-log")
        assert done.code == 0, done.stderr
        assert "error" not in done.stdout.lower(), done.stdout
        payloads = re.findall(r"key: (\{.*?\}) payload: (\{.*\})$", done.stdout, re.MULTILINE)
        assert payloads, done.stdout
        key, value = (json.loads(part) for part in payloads[-1])
        assert str(key["type"]) == "0" and key["data"]["groupId"] == group and key["data"]["partition"] == 0
        assert value["data"]["startOffset"] == COUNT  # every record accepted or rejected
        _kafka_decodes_our_membership(broker, group)
    finally:
        broker.close()
