"""MirrorMaker 2 between pybroker and Apache Kafka, both ways, with a consumer group moved live (issue 31).

MM2 runs in dedicated mode (`org.apache.kafka.connect.mirror.MirrorMaker`) from the properties that
docs/migrating.md shows, only the two bootstrap addresses replaced. Each way the same migration runs: records go
into a source topic, a group on the source consumes part of them and commits, MM2 copies the topic to the target
as `<source>.<topic>` and commits the group's translated offsets there; the group, pointed at the target, goes on
from there and reads the rest: nothing lost, and at most `offset.lag.max` records read twice (the bound
docs/migrating.md states). Afterwards MM2's internal topics on pybroker (heartbeats, checkpoints, offset syncs,
the workers' configs/offsets/status) exist and are compacted.

Everything here runs on the test's thread; MM2 is one JVM, the Kafka node is the session's.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.doc_blocks import ROOT, blocks_of
from tests.ecosystem.jvm import JVM_FLAGS, connect_home, connect_missing, need
from tests.integration.brokers import BrokerProcess
from tests.kafka_node import KafkaNode

pytestmark = pytest.mark.slow

DEADLINE_S = 240.0
BEFORE, AFTER = 60, 40  # records produced before the group moves, and after
CONSUMED = 45  # of BEFORE, read and committed on the source before the move
DOC = ROOT / "docs" / "migrating.md"
COORDINATOR_BUSY = (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                    KafkaError.NOT_COORDINATOR)


def mm2_properties(pybroker: str, kafka: str) -> dict[str, str]:
    """MirrorMaker 2's properties block of docs/migrating.md (the one naming the clusters), with the two
    clusters' real addresses."""
    [block] = [b for b in blocks_of(DOC) if b.language == "properties" and b.text.lstrip().startswith("clusters")]
    props = {}
    for line in block.text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    props["pybroker.bootstrap.servers"], props["kafka.bootstrap.servers"] = pybroker, kafka
    return props


class MirrorMaker:
    """One MM2 JVM in dedicated mode; its output goes to `log`."""

    def __init__(self, workdir: Path, props: dict[str, str]) -> None:
        self.config = workdir / "mm2.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log = workdir / "mm2.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                ["java", *JVM_FLAGS, "-cp", str(connect_home() / "libs" / "*"),
                 "org.apache.kafka.connect.mirror.MirrorMaker", str(self.config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def alive(self) -> None:
        assert self.process is not None and self.process.poll() is None, self.tail()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


@pytest.fixture
def pybroker(fresh_broker: BrokerProcess) -> BrokerProcess:
    need(connect_missing())
    return fresh_broker


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(topic, key=str(i).encode(), value=f"record-{i}".encode())
    assert producer.flush(30) == 0


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "log_level": 3})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    except Exception:  # the topic is not there yet
        return -1
    finally:
        consumer.close()


def _consume(bootstrap: str, group: str, topic: str, count: int, deadline: float) -> list[int]:
    """Read `count` records as `group` (from its committed offset, else the start), commit, leave."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "log_level": 3})
    try:
        consumer.subscribe([topic])
        keys: list[int] = []
        while len(keys) < count:
            assert time.monotonic() < deadline, f"{group} read only {keys} from {topic}"
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert not message.error(), message.error()
            keys.append(int(message.key()))
            if len(keys) == count:
                consumer.commit(message=message, asynchronous=False)
        return keys
    finally:
        consumer.close()


def _register(bootstrap: str, group: str, topic: str, deadline: float) -> None:
    """Commit offset 0 for `group`; a fresh Kafka node answers COORDINATOR_LOAD_IN_PROGRESS for a while (its
    __consumer_offsets is being created), which librdkafka does not retry on an explicit commit."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                return
            except KafkaException as exc:
                error = exc.args[0]
                assert error.retriable() or error.code() in COORDINATOR_BUSY, exc
                assert time.monotonic() < deadline, exc
                time.sleep(0.5)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])
    try:
        [partition] = next(iter(future.values())).result(30).topic_partitions
    except Exception:
        return -1
    return partition.offset


def _until(what: str, check: Callable[[], bool], deadline: float, mm2: MirrorMaker) -> None:
    while not check():
        mm2.alive()
        assert time.monotonic() < deadline, f"{what} did not happen in time; MM2's log:\n{mm2.tail()}"
        time.sleep(0.5)


def _migrate(source: str, target: str, alias: str, topic: str, group: str, lag_max: int,
             mm2: MirrorMaker, deadline: float) -> dict[str, int]:
    """One way's live migration of `group` reading `topic`; returns what it measured."""
    remote = f"{alias}.{topic}"
    _produce(source, topic, 0, BEFORE)
    _until(f"{remote} copied", lambda: _end_offset(target, remote) >= BEFORE, deadline, mm2)
    assert _consume(source, group, topic, CONSUMED, deadline) == list(range(CONSUMED))
    began = time.monotonic()
    # the group was registered at 0 before MM2 started: a later offset there is the translated commit
    _until(f"{group}'s offset synced", lambda: _committed(target, group, remote) > 0, deadline, mm2)
    synced_after = time.monotonic() - began
    _produce(source, topic, BEFORE, AFTER)  # the producers never stopped
    _until(f"{remote} caught up", lambda: _end_offset(target, remote) >= BEFORE + AFTER, deadline, mm2)
    resumed_at = _committed(target, group, remote)
    keys = _consume(target, group, remote, BEFORE + AFTER - resumed_at, deadline)
    assert keys == list(range(resumed_at, BEFORE + AFTER)), keys  # in order, to the end
    duplicates = CONSUMED - resumed_at
    assert 0 <= duplicates <= lag_max, (resumed_at, lag_max)  # nothing skipped, bounded re-reads
    return {"duplicates": duplicates, "synced_after_s": round(synced_after, 1)}


def test_mirror_maker_moves_a_consumer_group_to_kafka_and_back(
        pybroker: BrokerProcess, kafka_oracle: KafkaNode, tmp_path: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    kafka = f"127.0.0.1:{kafka_oracle.port}"
    props = mm2_properties(pybroker.bootstrap, kafka)
    lag_max = int(props["offset.lag.max"])
    tag = uuid.uuid4().hex[:6]
    # the groups exist (committed at 0) before MM2 starts: it translates only with syncs it sees live
    orders, returns = f"orders-{tag}", f"returns-{tag}"
    billing, refunds = f"billing-{tag}", f"refunds-{tag}"
    for bootstrap, topic, group in ((pybroker.bootstrap, orders, billing), (kafka, returns, refunds)):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(30)
        _register(bootstrap, group, topic, deadline)
    mm2 = MirrorMaker(tmp_path, props)
    mm2.start()
    try:
        there = _migrate(pybroker.bootstrap, kafka, "pybroker", orders, billing, lag_max, mm2, deadline)
        back = _migrate(kafka, pybroker.bootstrap, "kafka", returns, refunds, lag_max, mm2, deadline)
        print(f"pybroker->kafka {there}, kafka->pybroker {back}")
        admin = AdminClient({"bootstrap.servers": pybroker.bootstrap})
        internal = ["heartbeats", "kafka.checkpoints.internal", "mm2-offset-syncs.kafka.internal",
                    "mm2-configs.kafka.internal", "mm2-offsets.kafka.internal", "mm2-status.kafka.internal"]
        _until("MM2's internal topics on pybroker",
               lambda: set(internal) <= set(admin.list_topics(timeout=30).topics), deadline, mm2)
        for topic in internal:
            described = admin.describe_configs([ConfigResource("topic", topic)])
            assert next(iter(described.values())).result(30)["cleanup.policy"].value == "compact", topic
        for topic in ("heartbeats", "kafka.checkpoints.internal", "mm2-offset-syncs.kafka.internal"):
            assert _end_offset(pybroker.bootstrap, topic) > 0, topic  # MM2 wrote them on pybroker
        assert not re.search(r"Traceback", pybroker.log_path.read_text(errors="replace"))
        # MM2 resets Kafka-only topic keys on pybroker by DELETE; a refusal would leave the mirror's configs stale
        assert "Could not alter configuration" not in mm2.log.read_text(errors="replace"), mm2.tail()
    finally:
        mm2.stop()
