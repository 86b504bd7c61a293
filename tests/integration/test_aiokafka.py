"""aiokafka against a real broker: producer and assign-only consumer (no group), with compression.

aiokafka has its own record-batch code and its own idea of which API versions to use, so it is a third
independent implementation of the client side.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from tests.integration.brokers import BrokerProcess

RECORDS = 300
TIMEOUTS = {"request_timeout_ms": 10_000}


# aiokafka's idempotent path uses InitProducerId v0 and its own sequence bookkeeping: cover both paths.
CASES = [(None, False), ("gzip", True), ("snappy", False), ("lz4", True), ("zstd", True)]


@pytest.mark.parametrize(("codec", "idempotent"), CASES,
                         ids=[f"{c or 'none'}-{'idempotent' if i else 'plain'}" for c, i in CASES])
async def test_round_trip_with_compression(broker: BrokerProcess, new_topic: Callable[..., str],
                                           codec: str | None, idempotent: bool) -> None:
    topic = new_topic()
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec,
                                enable_idempotence=idempotent, acks="all", linger_ms=5, **TIMEOUTS)
    await asyncio.wait_for(producer.start(), 15)
    try:
        sends = [await producer.send(topic, f"value-{i}".encode(), key=f"k{i % 4}".encode(), partition=0,
                                     headers=[("i", str(i).encode())])
                 for i in range(RECORDS)]
        metadata = await asyncio.wait_for(asyncio.gather(*sends), 20)
    finally:
        await asyncio.wait_for(producer.stop(), 15)
    assert [m.offset for m in metadata] == list(range(RECORDS))

    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                fetch_max_wait_ms=200, **TIMEOUTS)
    await asyncio.wait_for(consumer.start(), 15)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = []
        deadline = time.monotonic() + 20
        while len(got) < RECORDS and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=300)).values():
                got += batch
    finally:
        await asyncio.wait_for(consumer.stop(), 15)
    assert [m.value for m in got] == [f"value-{i}".encode() for i in range(RECORDS)]
    assert [m.key for m in got] == [f"k{i % 4}".encode() for i in range(RECORDS)]
    assert [list(m.headers) for m in got] == [[("i", str(i).encode())] for i in range(RECORDS)]
    assert [m.offset for m in got] == list(range(RECORDS))
