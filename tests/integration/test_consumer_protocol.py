"""librdkafka (confluent-kafka) with `group.protocol=consumer` (KIP-848) against a real broker.

Groups of one to three members: every partition consumed by exactly one member, rebalances as members
come and go, a member killed (its session runs out and its partitions go to the others), static members
rejoining with their partitions, offsets committed under member epochs and resumed after a broker
restart, a static classic member beside a consumer-protocol one, OffsetCommit v8 refused to a consumer-protocol
member. Session and heartbeat timeouts are shortened by the broker's config, so each test takes seconds.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_flush, ck_producer

FAST = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "3",
}
PARTITIONS = 6


def _create(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)


def _produce(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS) -> None:
    producer = ck_producer(bootstrap)
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    ck_flush(producer)


@contextmanager
def _consumer(bootstrap: str, group: str, **config: Any) -> Iterator[Consumer]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000, **config})
    try:
        yield consumer
    finally:
        consumer.close()


def _assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _poll_until(consumers: list[Consumer], done: Callable[[], bool], timeout: float = 60.0,
                seen: list[tuple[int, int, int]] | None = None) -> None:
    """Poll every consumer until `done()`; messages go to `seen` as (consumer index, partition, offset)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            msg = consumer.poll(0.05)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(msg.error())
            elif seen is not None:
                seen.append((i, msg.partition(), msg.offset()))
        if done():
            return
    raise AssertionError("timed out: " + repr([sorted(_assigned(c)) for c in consumers]))


def _split(consumers: list[Consumer]) -> Callable[[], bool]:
    """Every partition owned by exactly one of the consumers, evenly."""
    def check() -> bool:
        owned = [_assigned(c) for c in consumers]
        union = set().union(*owned)
        even = max(map(len, owned)) - min(map(len, owned)) <= 1
        return union == set(range(PARTITIONS)) and sum(map(len, owned)) == PARTITIONS and even
    return check


def test_one_member_consumes_everything_and_commits(broker_factory: Callable[..., BrokerProcess],
                                                    new_topic: Callable[..., str]) -> None:
    broker = broker_factory(FAST)
    topic = new_topic()
    _create(broker.bootstrap, topic)
    _produce(broker.bootstrap, topic, 60)
    seen: list[tuple[int, int, int]] = []
    with _consumer(broker.bootstrap, "g1") as consumer:
        consumer.subscribe([topic])
        _poll_until([consumer], lambda: len(seen) == 60, seen=seen)
        assert _assigned(consumer) == set(range(PARTITIONS))
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert sum(tp.offset for tp in committed) == 60


def test_three_members_share_and_rebalance_as_they_come_and_go(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory(FAST)
    topic = new_topic()
    _create(broker.bootstrap, topic)
    with ExitStack() as stack:
        consumers = [stack.enter_context(_consumer(broker.bootstrap, "g3", **{"client.id": f"c{i}"}))
                     for i in range(3)]
        consumers[0].subscribe([topic])
        _poll_until(consumers[:1], _split(consumers[:1]))
        for n in (2, 3):
            consumers[n - 1].subscribe([topic])
            _poll_until(consumers[:n], _split(consumers[:n]))
        admin = ck_admin(broker.bootstrap)
        described = admin.describe_consumer_groups(["g3"])["g3"].result(10)
        assert len(described.members) == 3
        assert sorted(p.partition for m in described.members for p in m.assignment.topic_partitions) == \
            list(range(PARTITIONS))
        listed = admin.list_consumer_groups().result(10)
        assert "g3" in {g.group_id for g in listed.valid}
        consumers[2].close()
        _poll_until(consumers[:2], _split(consumers[:2]))


KILLED_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


@pytest.mark.slow  # the session must run out
def test_a_killed_member_loses_its_partitions_after_its_session(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory(FAST)
    topic = new_topic()
    _create(broker.bootstrap, topic)
    victim = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, broker.bootstrap, "gk", topic],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().startswith(b"assigned")
        with _consumer(broker.bootstrap, "gk") as survivor:
            survivor.subscribe([topic])
            _poll_until([survivor], lambda: 0 < len(_assigned(survivor)) < PARTITIONS)
            started = time.monotonic()  # before the kill: a slow wait for the exit does not shorten it
            victim.kill()
            victim.wait(30)
            _poll_until([survivor], lambda: _assigned(survivor) == set(range(PARTITIONS)))
            # the session (3 s) had to run out first
            assert time.monotonic() - started > 1.5
    finally:
        victim.kill()
        victim.wait(10)
        if victim.stdout is not None:
            victim.stdout.close()


@pytest.mark.slow
def test_a_static_member_rejoins_with_its_partitions(broker_factory: Callable[..., BrokerProcess],
                                                     new_topic: Callable[..., str]) -> None:
    broker = broker_factory(FAST)
    topic = new_topic()
    _create(broker.bootstrap, topic)
    with _consumer(broker.bootstrap, "gs", **{"group.instance.id": "other"}) as other:
        other.subscribe([topic])
        with _consumer(broker.bootstrap, "gs", **{"group.instance.id": "me"}) as me:
            me.subscribe([topic])
            _poll_until([other, me], _split([other, me]))
            mine = _assigned(me)
        # `me` left as a static member (epoch -2): its partitions wait for it, nobody else takes them
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            other.poll(0.05)
        assert not (_assigned(other) & mine)
        with _consumer(broker.bootstrap, "gs", **{"group.instance.id": "me"}) as again:
            again.subscribe([topic])
            _poll_until([other, again], lambda: _assigned(again) == mine and _split([other, again])())


@pytest.mark.slow  # a broker restart
def test_offsets_committed_under_member_epochs_resume_after_a_restart(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory(FAST, needs_restart=True)
    topic = new_topic()
    _create(broker.bootstrap, topic)
    _produce(broker.bootstrap, topic, 60)
    seen: list[tuple[int, int, int]] = []
    with _consumer(broker.bootstrap, "gr") as consumer:
        consumer.subscribe([topic])
        _poll_until([consumer], lambda: len(seen) >= 30, seen=seen)
        consumer.commit(asynchronous=False)
        positions = {tp.partition: tp.offset for tp in consumer.position(
            [TopicPartition(topic, p) for p in range(PARTITIONS)])}
    broker.restart()
    admin = ck_admin(broker.bootstrap)
    described = admin.describe_consumer_groups(["gr"])["gr"].result(10)
    assert str(described.type).endswith("CONSUMER") and described.members == []  # the group came back, empty
    rest: list[tuple[int, int, int]] = []
    with _consumer(broker.bootstrap, "gr") as consumer:
        consumer.subscribe([topic])
        _poll_until([consumer], lambda: len(rest) == 60 - sum(max(o, 0) for o in positions.values()), seen=rest)
        assert all(offset >= positions[partition] for _, partition, offset in rest)
        time.sleep(0.5)
        consumer.poll(0.2)
        assert len(rest) == 60 - sum(max(o, 0) for o in positions.values())


def test_a_regex_subscription_follows_new_topics(broker_factory: Callable[..., BrokerProcess],
                                                new_topic: Callable[..., str]) -> None:
    broker = broker_factory(FAST)
    prefix = new_topic()
    _create(broker.bootstrap, f"{prefix}-a", 2)
    with _consumer(broker.bootstrap, "gx") as consumer:
        consumer.subscribe([f"^{prefix}-.*"])
        _poll_until([consumer], lambda: {tp.topic for tp in consumer.assignment()} == {f"{prefix}-a"})
        _create(broker.bootstrap, f"{prefix}-b", 2)
        _poll_until([consumer], lambda: {tp.topic for tp in consumer.assignment()} == {f"{prefix}-a", f"{prefix}-b"})


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_classic_member_shares_a_consumer_group_and_the_group_turns_classic(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str], strategy: str) -> None:
    broker = broker_factory({**FAST, "group.initial.rebalance.delay.ms": "0"})
    topic = new_topic()
    _create(broker.bootstrap, topic)
    classic_config = {"group.protocol": "classic", "partition.assignment.strategy": strategy,
                      "heartbeat.interval.ms": 300, "session.timeout.ms": 6000}
    with ExitStack() as stack:
        modern = stack.enter_context(_consumer(broker.bootstrap, "gm"))
        modern.subscribe([topic])
        _poll_until([modern], _split([modern]))
        classic = stack.enter_context(_consumer(broker.bootstrap, "gm", **classic_config))
        classic.subscribe([topic])
        _poll_until([modern, classic], _split([modern, classic]))
        admin = ck_admin(broker.bootstrap)
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
        assert str(listed["gm"].type).endswith("CONSUMER")
        modern.unsubscribe()
        _poll_until([classic], _split([classic]))
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
        assert str(listed["gm"].type).endswith("CLASSIC")


def test_a_consumer_protocol_member_must_commit_with_offset_commit_v9(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    from pybroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
    from pybroker.protocol.messages.offset_commit import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from tests.integration.hostile import RawClient

    broker = broker_factory(FAST)
    topic = new_topic()
    _create(broker.bootstrap, topic)
    host, port = broker.bootstrap.rsplit(":", 1)
    with RawClient(host, int(port)) as client:
        deadline = time.monotonic() + 20
        while True:  # the coordinator answers once __consumer_offsets is loaded
            joined = client.call(ConsumerGroupHeartbeatRequest(
                group_id="gv", member_id="raw-member", member_epoch=0, rebalance_timeout_ms=30000,
                subscribed_topic_names=[topic], topic_partitions=[]), 0)
            if joined.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert joined.error_code == 0, joined

        def commit(version: int) -> int:
            answer = client.call(OffsetCommitRequest(
                group_id="gv", generation_id_or_member_epoch=joined.member_epoch, member_id="raw-member",
                topics=[OffsetCommitRequestTopic(name=topic, partitions=[OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1)])]), version)
            code: int = answer.topics[0].partitions[0].error_code
            return code

        assert commit(8) == 35  # UNSUPPORTED_VERSION: a member of the consumer protocol commits with v9+
        assert commit(9) == 0


@pytest.mark.slow
def test_a_static_classic_member_shares_a_consumer_group(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory({**FAST, "group.initial.rebalance.delay.ms": "0"})
    topic = new_topic()
    _create(broker.bootstrap, topic)
    classic_config = {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky",
                      "heartbeat.interval.ms": 300, "session.timeout.ms": 6000, "group.instance.id": "static-1"}
    with ExitStack() as stack:
        modern = stack.enter_context(_consumer(broker.bootstrap, "gs"))
        modern.subscribe([topic])
        _poll_until([modern], _split([modern]))
        classic = stack.enter_context(_consumer(broker.bootstrap, "gs", **classic_config))
        classic.subscribe([topic])
        _poll_until([modern, classic], _split([modern, classic]))
        admin = ck_admin(broker.bootstrap)
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
        assert str(listed["gs"].type).endswith("CONSUMER")
