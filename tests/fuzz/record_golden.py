"""Re-capture the golden request frames: drive every stock client through the recording proxy.

    .venv/bin/python -m tests.fuzz.record_golden            # rewrites tests/fixtures/golden/

A real `pybroker start` process runs behind a `RecordingProxy` (its advertised listener is the proxy,
so every connection a client opens is recorded). kafka-python, confluent-kafka (librdkafka), aiokafka
and kcat (when installed) each produce with every codec and idempotently, consume by assignment and in
a consumer group (join, sync, heartbeat, commit, fetch offsets, leave), and run their admin calls
(topics, partitions, configs, delete records, log dirs, groups, offset delete, list offsets). Each step
is independent: a step a client or the broker refuses is reported and the run goes on.

Afterwards, every (api, version) the broker advertises that no client sent gets a generated seed
(`generated_seeds`), and the README's table is refreshed.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fuzz.capture import Recorder, RecordingProxy
from tests.fuzz.seeds import GOLDEN_DIR, write_generated_seeds
from tests.integration.brokers import BrokerProcess, free_port

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KCAT = shutil.which("kcat") or shutil.which("kafkacat")
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
             "delete.topic.enable": "true"}


def step(name: str, fn: Callable[[], Any]) -> None:
    started = time.monotonic()
    try:
        fn()
        print(f"  ok    {name} ({time.monotonic() - started:.1f}s)")
    except Exception as exc:
        print(f"  FAIL  {name}: {exc!r}")
        traceback.print_exc(limit=2, file=sys.stdout)


# -- kafka-python --------------------------------------------------------------------------------------
def kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    from kafka.structs import OffsetAndMetadata

    from tests.integration.clients import kp_admin, kp_consumer, kp_producer

    topic, group = "kp-golden", "kp-golden-group"

    def admin_create() -> None:
        with kp_admin(bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 2, 1), NewTopic("kp-golden-doomed", 1, 1)])
            admin.create_partitions({topic: NewPartitions(3)})

    def produce() -> None:
        for codec in CODECS:
            with kp_producer(bootstrap, acks="all", compression_type=None if codec == "none" else codec) as p:
                for i in range(5):
                    p.send(topic, f"{codec}-{i}".encode(), key=b"k", partition=i % 3)
                p.flush(20)
        with kp_producer(bootstrap, enable_idempotence=True, acks="all") as p:
            p.send(topic, b"idempotent", partition=0)
            p.flush(20)
        with kp_producer(bootstrap, acks=0) as p:
            p.send(topic, b"acks0", partition=1)
            p.flush(20)

    def consume_assigned() -> None:
        with kp_consumer(bootstrap) as consumer:
            tps = [TopicPartition(topic, p) for p in range(3)]
            consumer.assign(tps)
            consumer.seek_to_beginning()
            consumer.poll(timeout_ms=1000)
            consumer.beginning_offsets(tps)
            consumer.end_offsets(tps)
            consumer.offsets_for_times({tp: 0 for tp in tps})

    def consume_group() -> None:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                 auto_offset_reset="earliest", session_timeout_ms=6000,
                                 heartbeat_interval_ms=300, fetch_max_wait_ms=100, request_timeout_ms=10_000)
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 10
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(timeout_ms=500)
            consumer.poll(timeout_ms=1500)  # heartbeats
            consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "meta", -1)})
            consumer.committed(TopicPartition(topic, 0))
        finally:
            consumer.close()  # LeaveGroup

    def admin_rest() -> None:
        with kp_admin(bootstrap) as admin:
            admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic),
                                    ConfigResource(ConfigResourceType.BROKER, "1")])
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "86400000"})])
            admin.delete_records({TopicPartition(topic, 0): 1})
            admin.describe_log_dirs()
            admin.list_groups()
            admin.describe_groups([group])
            admin.list_group_offsets({group: None})
            admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
            admin.delete_groups([group])
            admin.describe_topics([topic])
            admin.describe_cluster()
            admin.delete_topics(["kp-golden-doomed"])

    step("kafka-python admin create", admin_create)
    step("kafka-python produce", produce)
    step("kafka-python consume assigned", consume_assigned)
    step("kafka-python consumer group", consume_group)
    step("kafka-python admin", admin_rest)


# -- confluent-kafka (librdkafka) ----------------------------------------------------------------------
def confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    from tests.integration.clients import ck_admin, ck_flush, ck_producer, ck_read, close_clients

    topic, group = "ck-golden", "ck-golden-group"
    admin = ck_admin(bootstrap)

    def wait(futures: dict[Any, Any]) -> None:
        for future in futures.values():
            try:
                future.result(15)
            except Exception as exc:
                print(f"        (answered {exc!r})")

    def admin_create() -> None:
        wait(admin.create_topics([NewTopic(topic, 2, 1), NewTopic("ck-golden-doomed", 1, 1)]))
        wait(admin.create_partitions([NewPartitions(topic, 3)]))

    def produce() -> None:
        for codec in CODECS:
            producer = ck_producer(bootstrap, **{"compression.type": codec, "linger.ms": 5})
            for i in range(5):
                producer.produce(topic, f"{codec}-{i}".encode(), key=b"k", partition=i % 3)
            ck_flush(producer)
        producer = ck_producer(bootstrap, **{"enable.idempotence": True})
        producer.produce(topic, b"idempotent", partition=0, headers=[("h", b"v")])
        ck_flush(producer)
        producer = ck_producer(bootstrap, **{"acks": 0})
        producer.produce(topic, b"acks0", partition=1)
        ck_flush(producer)
        close_clients()

    def consume_group() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 300, "fetch.wait.max.ms": 100})
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 10
            got = 0
            while time.monotonic() < deadline and got < 5:
                for message in consumer.consume(10, timeout=0.5):
                    if message.error() is None:
                        got += 1
            consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
            consumer.committed([TopicPartition(topic, 0)], timeout=10)
            consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            consumer.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
        finally:
            consumer.close()

    def admin_rest() -> None:
        wait(admin.describe_configs([ConfigResource("topic", topic), ConfigResource("broker", "1")]))
        with warnings.catch_warnings():  # deprecated in favour of the incremental one, still sent by clients
            warnings.simplefilter("ignore", DeprecationWarning)
            wait(admin.alter_configs([ConfigResource("topic", topic, set_config={"retention.ms": "86400000"})]))
        wait(admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET)])]))
        wait(admin.delete_records([TopicPartition(topic, 0, 1)]))
        wait(admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest(),
                                 TopicPartition(topic, 1): OffsetSpec.latest(),
                                 TopicPartition(topic, 2): OffsetSpec.max_timestamp()}))
        admin.list_consumer_groups().result(15)
        wait(admin.describe_consumer_groups([group]))
        wait(admin.delete_consumer_groups([group]))
        wait(admin.delete_topics(["ck-golden-doomed"]))
        admin.list_topics(timeout=10)

    step("librdkafka admin create", admin_create)
    step("librdkafka produce", produce)
    step("librdkafka read", lambda: ck_read(bootstrap, topic, 3, timeout=15))
    step("librdkafka consumer group", consume_group)
    step("librdkafka admin", admin_rest)


# -- aiokafka ------------------------------------------------------------------------------------------
def aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.structs import OffsetAndMetadata

    topic, group = "aio-golden", "aio-golden-group"

    async def admin_create() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 2, 1)])
            await admin.create_partitions({topic: NewPartitions(3)})
        finally:
            await admin.close()

    async def produce() -> None:
        for codec in CODECS:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10_000,
                                        compression_type=None if codec == "none" else codec)
            await producer.start()
            try:
                for i in range(5):
                    await producer.send_and_wait(topic, f"{codec}-{i}".encode(), key=b"k", partition=i % 3)
            finally:
                await producer.stop()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"idempotent", partition=0, headers=[("h", b"v")])
        finally:
            await producer.stop()

    async def consume_group() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    session_timeout_ms=6000, heartbeat_interval_ms=300, fetch_max_wait_ms=100)
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=3000)
            await asyncio.sleep(1)  # heartbeats
            tp = TopicPartition(topic, 0)
            await consumer.commit({tp: OffsetAndMetadata(1, "")})
            await consumer.committed(tp)
            await consumer.beginning_offsets([tp])
            await consumer.end_offsets([tp])
            await consumer.offsets_for_times({tp: 0})
        finally:
            await consumer.stop()

    async def admin_rest() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        await admin.start()
        try:
            await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                      {"retention.ms": "86400000"})])
            await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(1)})
            await admin.list_consumer_groups()
            await admin.describe_consumer_groups([group])
            await admin.list_consumer_group_offsets(group)
            await admin.describe_cluster()
            await admin.describe_topics([topic])
            await admin.delete_topics([topic])
        finally:
            await admin.close()

    for name, fn in (("admin create", admin_create), ("produce", produce), ("consumer group", consume_group),
                     ("admin", admin_rest)):
        step(f"aiokafka {name}", lambda fn=fn: asyncio.run(fn()))


# -- kcat ----------------------------------------------------------------------------------------------
def kcat(bootstrap: str) -> None:
    if KCAT is None:
        print("  skip  kcat is not installed")
        return
    topic = "kcat-golden"

    def run(*args: str, data: bytes | None = None) -> None:
        subprocess.run([KCAT, "-b", bootstrap, *args], input=data, capture_output=True, timeout=30, check=True)

    def produce() -> None:
        for codec in CODECS:
            run("-P", "-t", topic, "-p", "0", "-z", codec, "-X", "topic.acks=all", data=b"a\nb\nc\n")

    step("kcat metadata", lambda: run("-L"))
    step("kcat produce", produce)
    step("kcat consume", lambda: run("-C", "-t", topic, "-o", "beginning", "-e"))
    step("kcat group", lambda: run("-G", "kcat-golden-group", topic, "-o", "beginning", "-e",
                                   "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100"))


CLIENTS: dict[str, Callable[[str], None]] = {
    "kafka-python": kafka_python, "librdkafka": confluent, "aiokafka": aiokafka, "kcat": kcat}


def main() -> int:
    recorder = Recorder()
    broker_port = free_port()
    proxy = RecordingProxy(("127.0.0.1", broker_port), recorder).start()
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        broker = BrokerProcess(Path(tmp), {**OVERRIDES, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"},
                               port=broker_port).start()
        bootstrap = f"127.0.0.1:{proxy.port}"
        try:
            for label, drive in CLIENTS.items():
                print(f"{label}:")
                proxy.label = label
                drive(bootstrap)
                time.sleep(0.5)  # the last frames of closing clients
        finally:
            broker.stop(expect_code=None)
            broker.close()
            proxy.stop()
    for old in GOLDEN_DIR.glob("*.bin"):
        old.unlink()
    captured = recorder.save(GOLDEN_DIR)
    generated = write_generated_seeds()
    print(f"{captured} captured frames, {generated} generated seeds in {GOLDEN_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
