"""Consumer groups with stock clients against the real broker process.

kafka-python, confluent-kafka (librdkafka), aiokafka and kcat each run Kafka's classic group protocol
with their own code: they join, split partitions, rebalance when members come and go (or die without a
word), commit, and find their commits again after the broker was killed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import KafkaError
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError as KpError
from kafka.structs import OffsetAndMetadata

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_consumer, ck_producer, kp_admin, kp_producer, kp_read
from tests.integration.conftest import BrokerFactory

PARTITIONS = 4
SESSION_MS = 6000
POLL_MS = 1000
KCAT = shutil.which("kcat") or shutil.which("kafkacat")
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "10"}
KP_GROUP: dict[str, Any] = {"enable_auto_commit": False, "auto_offset_reset": "earliest",
                            "session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": 500,
                            "request_timeout_ms": 10_000, "fetch_max_wait_ms": 100,
                            "reconnect_backoff_max_ms": 1000}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("groups"), GROUP_OVERRIDES).start()
    try:
        yield proc
    finally:
        if proc.is_running():
            proc.stop()
        proc.close()


def _topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> str:
    with kp_admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def _produce(bootstrap: str, topic: str, count: int) -> set[bytes]:
    values = {f"v{i}".encode() for i in range(count)}
    with kp_producer(bootstrap, acks="all") as producer:
        for i, value in enumerate(sorted(values)):
            producer.send(topic, value, key=str(i).encode(), partition=i % PARTITIONS)
        producer.flush(20)
    return values


class Polling:
    """kafka-python consumers each polled by a thread of its own, as applications run them.

    One thread polling several members in turn deadlocks a rebalance: kafka-python's poll can block in
    JoinGroup until the other members rejoin, and they only rejoin when polled. Polls are a second long,
    as applications' are: with very short polls kafka-python 3.0.12 sometimes drops a join it completed
    after the poll timed out, and that member never heartbeats again (seen with tracing on the client).
    """

    def __init__(self, consumers: list[KafkaConsumer]) -> None:
        self.consumers = consumers
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(c,), daemon=True) for c in consumers]
        for thread in self.threads:
            thread.start()

    def _run(self, consumer: KafkaConsumer) -> None:
        while not self.stop.is_set():
            try:
                consumer.poll(timeout_ms=POLL_MS, update_offsets=False)
            except Exception as exc:  # a client error is the test's business: report it, keep polling
                self.errors.append(repr(exc))

    def shares(self, topic: str) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment() if tp.topic == topic} for c in self.consumers]

    def settle(self, topic: str, timeout: float = 40) -> list[set[int]]:
        """Wait until the assignments are disjoint, each non-empty, and cover the topic."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shares = self.shares(topic)
            if all(shares) and sum(len(s) for s in shares) == PARTITIONS and set().union(*shares) == set(
                    range(PARTITIONS)):
                return shares
            time.sleep(0.1)
        raise AssertionError(f"assignments never settled: {self.shares(topic)}; client errors: {self.errors[:5]}")

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)
        for consumer in self.consumers:
            consumer.close()


def _assignments_settle(consumers: list[KafkaConsumer], topic: str, timeout: float = 40) -> list[set[int]]:
    """For one consumer (polled here): wait until it owns every partition."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        consumers[0].poll(timeout_ms=POLL_MS, update_offsets=False)
        if {tp.partition for tp in consumers[0].assignment()} == set(range(PARTITIONS)):
            return [set(range(PARTITIONS))]
    raise AssertionError(f"assignment never settled: {consumers[0].assignment()}")


@pytest.mark.parametrize("members", [2, 3])
def test_kafka_python_consumers_split_partitions_disjointly_and_completely(
        group_broker: BrokerProcess, new_topic: Callable[..., str], members: int) -> None:
    topic = _topic(group_broker.bootstrap, new_topic())
    group = new_topic("group")
    polling = Polling([KafkaConsumer(topic, bootstrap_servers=group_broker.bootstrap, group_id=group, **KP_GROUP)
                       for _ in range(members)])
    try:
        shares = polling.settle(topic)
        assert sorted(len(s) for s in shares) == sorted([PARTITIONS // members + (i < PARTITIONS % members)
                                                        for i in range(members)])
        # one member leaves politely: the rest take over its partitions
        polling.stop.set()
        for thread in polling.threads:
            thread.join(10)
        polling.consumers.pop().close()
        polling = Polling(polling.consumers)
        polling.settle(topic)
    finally:
        polling.close()


MEMBER_SCRIPT = """
import sys, time
from kafka import KafkaConsumer
c = KafkaConsumer(sys.argv[2], bootstrap_servers=sys.argv[1], group_id=sys.argv[3], enable_auto_commit=False,
                  session_timeout_ms=6000, heartbeat_interval_ms=500, auto_offset_reset="earliest")
while True:
    c.poll(timeout_ms=1000)
    if c.assignment():
        print("assigned", sorted(tp.partition for tp in c.assignment()), flush=True)
"""


def test_member_killed_without_leaving_is_expelled_after_its_session_timeout(
        group_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = _topic(group_broker.bootstrap, new_topic())
    group = new_topic("group")
    survivor = KafkaConsumer(topic, bootstrap_servers=group_broker.bootstrap, group_id=group, **KP_GROUP)
    doomed = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, group_broker.bootstrap, topic, group],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 40
        shared = False
        while time.monotonic() < deadline and not shared:
            survivor.poll(timeout_ms=POLL_MS, update_offsets=False)
            mine = {tp.partition for tp in survivor.assignment()}
            shared = 0 < len(mine) < PARTITIONS
        assert shared, f"the second member never got partitions: {survivor.assignment()}"
        killed_at = time.monotonic()  # before the kill: a slow wait for the exit does not shorten `took`
        os.killpg(doomed.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout can tell
        doomed.wait(30)
        while time.monotonic() < killed_at + SESSION_MS / 1000 + 60:
            survivor.poll(timeout_ms=POLL_MS, update_offsets=False)
            if {tp.partition for tp in survivor.assignment()} == set(range(PARTITIONS)):
                break
        took = time.monotonic() - killed_at
        assert {tp.partition for tp in survivor.assignment()} == set(range(PARTITIONS))
        assert took >= SESSION_MS / 1000 - 1.5, f"expelled after {took:.1f}s, before its session timeout"
    finally:
        if doomed.poll() is None:
            os.killpg(doomed.pid, signal.SIGKILL)
            doomed.wait(10)
        survivor.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_confluent_group_consumes_every_record_once_with_manual_commits(
        group_broker: BrokerProcess, new_topic: Callable[..., str], strategy: str) -> None:
    topic = _topic(group_broker.bootstrap, new_topic())
    group = new_topic("group")
    config = {"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "partition.assignment.strategy": strategy,
              "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500, "enable.partition.eof": False}
    with ck_consumer(group_broker.bootstrap, **config) as first, \
            ck_consumer(group_broker.bootstrap, **config) as second:
        first.subscribe([topic])
        second.subscribe([topic])
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not (first.assignment() and second.assignment()):
            first.poll(0.1)
            second.poll(0.1)
        assert first.assignment() and second.assignment()
        owned = [{tp.partition for tp in c.assignment()} for c in (first, second)]
        assert owned[0].isdisjoint(owned[1]) and owned[0] | owned[1] == set(range(PARTITIONS))
        expected = _produce(group_broker.bootstrap, topic, 400)
        seen: list[bytes] = []
        deadline = time.monotonic() + 40
        while len(seen) < len(expected) and time.monotonic() < deadline:
            for consumer in (first, second):
                message = consumer.poll(0.1)
                if message is None or message.error():
                    continue
                seen.append(message.value())
                consumer.commit(message=message, asynchronous=False)
        assert sorted(seen) == sorted(expected)
        committed = first.committed([tp for tp in first.assignment()], timeout=10)
        assert all(tp.offset > 0 for tp in committed)
    # a new member of the same group starts at the commits: nothing left to read
    with ck_consumer(group_broker.bootstrap, **config) as late:
        late.subscribe([topic])
        end = time.monotonic() + 8
        leftovers = []
        while time.monotonic() < end:
            message = late.poll(0.2)
            if message is not None and not message.error():
                leftovers.append(message.value())
        assert leftovers == []
        assert late.assignment()


async def test_aiokafka_group_consumes_every_record_once_with_manual_commits(
        group_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = _topic(group_broker.bootstrap, new_topic())
    group = new_topic("group")
    expected = _produce(group_broker.bootstrap, topic, 300)

    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic, bootstrap_servers=group_broker.bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500, request_timeout_ms=10_000)

    consumer = member()
    await asyncio.wait_for(consumer.start(), 20)
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(seen) < 150 and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=300, max_records=50)
            for records in batches.values():
                seen += [r.value for r in records]
            await consumer.commit()
    finally:
        await consumer.stop()
    # the next member resumes where the commits say: no record twice, none missed
    consumer = member()
    await asyncio.wait_for(consumer.start(), 20)
    try:
        deadline = time.monotonic() + 30
        while len(seen) < len(expected) and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=300)
            for records in batches.values():
                seen += [r.value for r in records]
            await consumer.commit()
    finally:
        await consumer.stop()
    assert sorted(seen) == sorted(expected)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (`make test` installs it with apt)")
def test_kcat_balanced_consumer_reads_and_commits(group_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = _topic(group_broker.bootstrap, new_topic())
    group = new_topic("group")
    expected = _produce(group_broker.bootstrap, topic, 40)
    assert KCAT is not None

    def run() -> list[str]:
        result = subprocess.run(
            [KCAT, "-b", group_broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q",
             "-f", "%s\n",
             "-X", "auto.commit.interval.ms=100", "-X", "session.timeout.ms=6000", topic],
            capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr[-2000:]
        return [line for line in result.stdout.splitlines() if line]

    assert sorted(run()) == sorted(v.decode() for v in expected)
    with kp_admin(group_broker.bootstrap) as admin:
        offsets = admin.list_group_offsets(group)[group]
    assert sum(o.offset for o in offsets.values()) == len(expected)
    assert run() == []  # the second run starts at the commits


def test_commits_survive_kill_9_and_restart(broker_factory: BrokerFactory, new_topic: Callable[..., str]) -> None:
    proc = broker_factory(GROUP_OVERRIDES, needs_restart=True)
    topic = _topic(proc.bootstrap, new_topic())
    group = new_topic("group")
    _produce(proc.bootstrap, topic, 100)
    consumer = KafkaConsumer(topic, bootstrap_servers=proc.bootstrap, group_id=group, **KP_GROUP)
    try:
        _assignments_settle([consumer], topic)
        commits = {TopicPartition(topic, p): OffsetAndMetadata(10 + p, f"meta-{p}", -1) for p in range(PARTITIONS)}
        consumer.commit(commits)
    finally:
        consumer.close(autocommit=False)
    proc.kill9()
    proc.start()
    reader = KafkaConsumer(bootstrap_servers=proc.bootstrap, group_id=group, **KP_GROUP)
    try:
        deadline = time.monotonic() + 90  # polled: the restarted coordinator loads slowly on a busy machine
        found: dict[int, Any] = {}
        while time.monotonic() < deadline:
            try:
                found = {p: reader.committed(TopicPartition(topic, p), metadata=True) for p in range(PARTITIONS)}
                if all(m is not None for m in found.values()):
                    break
            except KpError:
                pass  # the coordinator may still be loading
            time.sleep(0.2)
        assert all(m is not None for m in found.values()), f"commits not readable after the restart: {found}"
        assert {p: (m.offset, m.metadata) for p, m in found.items()} == {
            p: (10 + p, f"meta-{p}") for p in range(PARTITIONS)}
    finally:
        reader.close()
    # a group member resumes from the commits after the restart
    consumer = KafkaConsumer(topic, bootstrap_servers=proc.bootstrap, group_id=group, **KP_GROUP)
    try:
        got = 0
        deadline = time.monotonic() + 90
        while got < 100 - sum(10 + p for p in range(PARTITIONS)) and time.monotonic() < deadline:
            got += sum(len(r) for r in consumer.poll(timeout_ms=300).values())
        assert got == 100 - sum(10 + p for p in range(PARTITIONS))
    finally:
        consumer.close()


def test_admin_lists_describes_and_deletes_groups_and_offsets(group_broker: BrokerProcess,
                                                               new_topic: Callable[..., str]) -> None:
    topic = _topic(group_broker.bootstrap, new_topic())
    live, idle = new_topic("live"), new_topic("idle")
    _produce(group_broker.bootstrap, topic, 20)
    member = KafkaConsumer(topic, bootstrap_servers=group_broker.bootstrap, group_id=live, **KP_GROUP)
    try:
        _assignments_settle([member], topic)
        member.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)})
        simple = KafkaConsumer(bootstrap_servers=group_broker.bootstrap, group_id=idle, **KP_GROUP)
        simple.assign([TopicPartition(topic, 1)])
        simple.commit({TopicPartition(topic, 1): OffsetAndMetadata(5, "", -1),
                       TopicPartition(topic, 2): OffsetAndMetadata(6, "", -1)})
        simple.close(autocommit=False)
        with kp_admin(group_broker.bootstrap) as admin:
            listed = {g["group_id"]: g for g in admin.list_groups()}
            assert listed[live]["group_state"] == "Stable" and listed[live]["protocol_type"] == "consumer"
            assert listed[idle]["group_state"] == "Empty"
            described = admin.describe_groups([live, idle])
            assert described[live]["group_state"] == "Stable"
            assert len(described[live]["members"]) == 1
            assert described[idle]["members"] == []
            assert admin.delete_groups([live])[live] != "OK"  # NonEmptyGroupError
            admin.delete_group_offsets(idle, [TopicPartition(topic, 1)])
            assert set(admin.list_group_offsets(idle)[idle]) == {TopicPartition(topic, 2)}
            assert admin.delete_groups([idle])[idle] == "OK"
            assert idle not in {g["group_id"] for g in admin.list_groups()}
    finally:
        member.close()


def test_offsets_topic_is_internal_readable_and_refuses_produce(group_broker: BrokerProcess,
                                                                new_topic: Callable[..., str]) -> None:
    topic = _topic(group_broker.bootstrap, new_topic())
    group = new_topic("group")
    committer = KafkaConsumer(bootstrap_servers=group_broker.bootstrap, group_id=group, **KP_GROUP)
    committer.assign([TopicPartition(topic, 0)])
    committer.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    committer.close(autocommit=False)
    from pybroker.broker.groups.placement import partition_for_group
    from pybroker.protocol.offsets_topic_records import OffsetRecord, decode_record

    partition = partition_for_group(group, 10)
    records = kp_read(group_broker.bootstrap, "__consumer_offsets", 10, expected=10_000, timeout=3)
    mine = [r for r in records if r.partition == partition
            and isinstance(decoded := decode_record(r.key, r.value), OffsetRecord) and decoded.group == group]
    assert mine, "the commit is a record in the group's partition of __consumer_offsets"
    # clients may read it but not write it (kafka-python refuses on its own, so ask librdkafka)
    reports: list[Any] = []
    producer = ck_producer(group_broker.bootstrap, **{"message.send.max.retries": 0})
    producer.produce("__consumer_offsets", b"x", key=b"k", partition=0,
                     on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() == KafkaError.TOPIC_EXCEPTION


def test_librdkafka_rejects_nothing_with_unknown_group_errors(group_broker: BrokerProcess,
                                                              new_topic: Callable[..., str]) -> None:
    """A confluent consumer subscribing and closing leaves cleanly (LeaveGroup), no error callbacks."""
    topic = _topic(group_broker.bootstrap, new_topic())
    errors: list[KafkaError] = []
    producer = ck_producer(group_broker.bootstrap)
    producer.produce(topic, b"x", partition=0)
    producer.flush(10)
    with ck_consumer(group_broker.bootstrap, **{"group.id": new_topic("g"), "error_cb": errors.append,
                                                "enable.partition.eof": False}) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        got = None
        while got is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got = message.value()
        assert got == b"x"
    assert errors == []



def test_offsets_of_an_empty_group_expire_and_the_group_goes(broker_factory: BrokerFactory,
                                                             new_topic: Callable[..., str]) -> None:
    proc = broker_factory({**GROUP_OVERRIDES, "offsets.retention.ms": "1000",
                           "offsets.retention.check.interval.ms": "200"})
    topic = _topic(proc.bootstrap, new_topic())
    group = new_topic("group")
    committer = KafkaConsumer(bootstrap_servers=proc.bootstrap, group_id=group, **KP_GROUP)
    committer.assign([TopicPartition(topic, 0)])
    committer.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1)})
    committer.close(autocommit=False)
    with kp_admin(proc.bootstrap) as admin:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and group in {g["group_id"] for g in admin.list_groups()}:
            time.sleep(0.2)
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.list_group_offsets(group)[group] == {}
