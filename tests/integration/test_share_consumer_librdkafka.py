"""librdkafka's share consumer (confluent-kafka's `ShareConsumer`, KIP-932) against a real broker.

The group starts at the earliest offset (a GROUP config set with the AdminClient, as a user does); then:
two share consumers in explicit mode read one partition together and every record is accepted exactly
once between them; a released record comes back; a rejected one never does; implicit mode accepts on the
next poll; and `pybroker share-groups` shows and changes what the consumers left.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_flush, ck_producer
from tests.integration.test_admin_cli import pybroker

COUNT = 40


def _setup(bootstrap: str, partitions: int = 1) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-rd-{suffix}", f"share-rd-group-{suffix}"
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    producer = ck_producer(bootstrap)
    for i in range(COUNT):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    ck_flush(producer)
    return topic, group


@contextmanager
def _share_consumer(bootstrap: str, group: str, topic: str, mode: str = "explicit") -> Iterator[ShareConsumer]:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": mode})
    consumer.subscribe([topic])
    try:
        yield consumer
    finally:
        consumer.close()


def _drain(consumers: list[ShareConsumer], on: Callable[[int, Any], None], done: Callable[[], bool],
           timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for i, consumer in enumerate(consumers):
            for msg in consumer.poll(0.2):
                assert msg.error() is None, msg.error()
                on(i, msg)
            consumer.commit_sync(10)


def test_two_share_consumers_split_one_partition(broker: BrokerProcess) -> None:
    topic, group = _setup(broker.bootstrap)
    accepted: dict[str, int] = {}
    with _share_consumer(broker.bootstrap, group, topic) as a, _share_consumer(broker.bootstrap, group, topic) as b:
        consumers = [a, b]

        def on(i: int, msg: Any) -> None:
            consumers[i].acknowledge(msg, AcknowledgeType.ACCEPT)
            value = msg.value().decode()
            assert value not in accepted, f"{value} delivered twice"
            accepted[value] = i

        _drain(consumers, on, lambda: len(accepted) == COUNT)
    assert set(accepted) == {f"v{i}" for i in range(COUNT)}


def test_release_comes_back_and_reject_does_not(broker: BrokerProcess) -> None:
    topic, group = _setup(broker.bootstrap)
    accepted: list[str] = []
    released: set[str] = set()
    rejected: set[str] = set()
    with _share_consumer(broker.bootstrap, group, topic) as consumer:
        def on(_i: int, msg: Any) -> None:
            value = msg.value().decode()
            assert value not in rejected
            number = int(value[1:])
            if number % 10 == 0 and value not in released:
                released.add(value)
                consumer.acknowledge(msg, AcknowledgeType.RELEASE)
            elif number % 10 == 5:
                rejected.add(value)
                consumer.acknowledge(msg, AcknowledgeType.REJECT)
            else:
                consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
                accepted.append(value)

        _drain([consumer], on, lambda: len(accepted) + len(rejected) == COUNT)
    assert sorted(accepted) == sorted(f"v{i}" for i in range(COUNT) if i % 10 != 5)
    assert released and released <= set(accepted)


def test_implicit_mode_accepts_on_the_next_poll(broker: BrokerProcess) -> None:
    topic, group = _setup(broker.bootstrap, partitions=2)
    seen: list[str] = []
    with _share_consumer(broker.bootstrap, group, topic, mode="implicit") as consumer:
        _drain([consumer], lambda _i, msg: seen.append(msg.value().decode()), lambda: len(set(seen)) == COUNT)
    assert sorted(set(seen)) == sorted(f"v{i}" for i in range(COUNT))


def _cli(broker: BrokerProcess, *args: str) -> Any:
    result = pybroker(*args, "--bootstrap-server", broker.bootstrap, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_pybroker_share_groups_cli(broker: BrokerProcess) -> None:
    """`pybroker share-groups`: list, describe (offsets, members, state), reset-offsets, delete-offsets, delete."""
    topic, group = _setup(broker.bootstrap)
    with _share_consumer(broker.bootstrap, group, topic) as consumer:
        seen: list[str] = []

        def on(_i: int, msg: Any) -> None:
            consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
            seen.append(msg.value().decode())

        _drain([consumer], on, lambda: len(seen) == COUNT)
        assert {"group": group, "state": "Stable"} in _cli(broker, "share-groups", "list")
        members = _cli(broker, "share-groups", "describe", group, "--members")
        assert len(members) == 1 and members[0]["partitions"] == 1
        state = _cli(broker, "share-groups", "describe", group, "--state")
        assert state[0]["state"] == "Stable" and state[0]["assignor"] == "simple"
    offsets = _cli(broker, "share-groups", "describe", group)
    assert offsets == [{"topic": topic, "partition": 0, "start_offset": COUNT, "lag": 0, "error": None}]
    plan = _cli(broker, "share-groups", "reset-offsets", group, "--topic", topic, "--to-offset", "5", "--execute")
    assert [(r["start_offset"], r["new_offset"]) for r in plan] == [(COUNT, 5)]
    assert _cli(broker, "share-groups", "describe", group)[0]["start_offset"] == 5
    deleted = _cli(broker, "share-groups", "delete-offsets", group, "--topic", topic)
    assert deleted == [{"group": group, "topic": topic, "deleted": True, "error": None}]
    assert _cli(broker, "share-groups", "delete", group) == [{"group": group, "deleted": True, "error": None}]
    assert group not in {row["group"] for row in _cli(broker, "share-groups", "list")}


def test_by_duration_starts_at_the_first_record_that_recent(broker: BrokerProcess) -> None:
    """`share.auto.offset.reset=by_duration:PT1H`: records stamped two hours ago are never delivered, the
    ones of the last minute all are."""
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-rd-{suffix}", f"share-rd-group-{suffix}"
    admin = ck_admin(broker.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(10)
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "by_duration:PT1H", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    producer = ck_producer(broker.bootstrap)
    now_ms = int(time.time() * 1000)
    for i in range(10):
        producer.produce(topic, value=f"old{i}".encode(), partition=0, timestamp=now_ms - 2 * 3_600_000)
    ck_flush(producer)
    for i in range(10):
        producer.produce(topic, value=f"new{i}".encode(), partition=0, timestamp=now_ms - 60_000)
    ck_flush(producer)
    seen: list[str] = []
    with _share_consumer(broker.bootstrap, group, topic) as consumer:
        def on(_i: int, msg: Any) -> None:
            consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
            seen.append(msg.value().decode())

        _drain([consumer], on, lambda: len(seen) >= 10)
    assert seen == [f"new{i}" for i in range(10)]
