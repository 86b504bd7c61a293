"""Produce-then-consume round trips, one per stock client, over whatever listener a test names.

Why: the TLS, SASL and SASL_SSL tests check the same thing (what a client produces on partition 0 it
reads back, in order) and differ only in the client's security settings, which each helper takes as a
dict in that client's own spelling. Each helper returns what it read; the test asserts. `subscribe=True`
reads through a consumer group (FindCoordinator, JoinGroup, ... over the secured listener too) instead
of assign + seek to offset 0.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AkTopicPartition
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import TopicPartition

from tests.integration.clients import ck_consumer, ck_flush, ck_producer, kp_consumer, kp_producer

READ_TIMEOUT_S = 30.0
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def kp_round_trip(bootstrap: str, topic: str, settings: Mapping[str, Any], values: Sequence[bytes], *,
                  subscribe: bool = False) -> list[bytes]:
    """kafka-python: send `values` to partition 0, flush, read them back."""
    with kp_producer(bootstrap, **settings) as producer:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush(timeout=20)
    got: list[bytes] = []
    with kp_consumer(bootstrap, **settings, auto_offset_reset="earliest") as consumer:
        if subscribe:
            consumer.subscribe([topic])
        else:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(got) < len(values) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=300).values():
                got += [record.value for record in batch]
    return got


def ck_round_trip(bootstrap: str, topic: str, settings: Mapping[str, Any], values: Sequence[bytes], *,
                  subscribe: bool = False) -> list[bytes]:
    """confluent-kafka: produce `values` to partition 0, insist all are delivered, read them back."""
    producer = ck_producer(bootstrap, **settings)
    for value in values:
        producer.produce(topic, value, partition=0)
    ck_flush(producer)
    got: list[bytes] = []
    with ck_consumer(bootstrap, **settings) as consumer:
        if subscribe:
            consumer.subscribe([topic])
        else:
            consumer.assign([CkTopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(got) < len(values) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=100, timeout=0.3):
                if message.error() is None:
                    got.append(bytes(message.value()))
    return got


async def ak_round_trip(bootstrap: str, topic: str, settings: Mapping[str, Any], values: Sequence[bytes], *,
                        producer_settings: Mapping[str, Any] | None = None) -> list[bytes]:
    """aiokafka: send_and_wait each of `values` to partition 0, then assign + seek 0 and read them back."""
    common: dict[str, Any] = {"bootstrap_servers": bootstrap, "request_timeout_ms": 10_000, **settings}
    producer = AIOKafkaProducer(**common, **(producer_settings or {}))
    await asyncio.wait_for(producer.start(), 15)
    try:
        for value in values:
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await asyncio.wait_for(producer.stop(), 15)
    consumer = AIOKafkaConsumer(**common, enable_auto_commit=False, fetch_max_wait_ms=200)
    await asyncio.wait_for(consumer.start(), 15)
    got: list[bytes] = []
    try:
        tp = AkTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(got) < len(values) and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=300)).values():
                got += [m.value for m in batch]
    finally:
        await asyncio.wait_for(consumer.stop(), 15)
    return got


def kcat(bootstrap: str, settings: Mapping[str, str], *args: str, stdin: str | None = None) -> str:
    """Run kcat against `bootstrap` with `settings` as `-X key=value`; insist it succeeds; its stdout."""
    assert KCAT is not None, "kcat is not installed"
    options = [arg for key, value in {"socket.timeout.ms": "10000", **settings}.items()
               for arg in ("-X", f"{key}={value}")]
    result = subprocess.run([KCAT, "-b", bootstrap, *args, *options], input=stdin, text=True,
                            capture_output=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def kcat_round_trip(bootstrap: str, topic: str, settings: Mapping[str, str], lines: Sequence[str]) -> list[str]:
    """kcat: produce `lines` to partition 0, then consume the partition from the beginning to its end."""
    kcat(bootstrap, settings, "-P", "-t", topic, "-p", "0", stdin="\n".join(lines) + "\n")
    return kcat(bootstrap, settings, "-C", "-t", topic, "-o", "beginning", "-e", "-q").splitlines()
