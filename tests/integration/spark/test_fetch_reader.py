"""A task's read with our own Fetch client and compiled decoder, against the kafka-python reader it replaced.

No Spark here: both readers are what a task runs (`fetch_reader.read_range`, `range_reader.read_range`
+ `schema.to_record_batch`), fed the same offset ranges of a real broker's partitions; they must give
the same rows. The records come from librdkafka (every codec, transactions) and kafka-python (a
hypothesis property over record shapes and sub-ranges).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.clients.spark.fetch_reader import read_range
from pybroker.clients.spark.planning import OffsetRange
from pybroker.clients.spark.range_reader import read_range as read_with_kafka_python
from pybroker.clients.spark.schema import to_record_batch
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import CK_PRODUCER, ck_flush, ck_producer, kp_producer
from tests.integration.spark.support import create_topic
from tests.unit.clients.spark.arrow_kit import rows_of

pytestmark = pytest.mark.slow
BASE_TS = 1_700_000_000_000


def _rows(batches: Any) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for batch in batches:
        rows += rows_of(batch, with_place=True)
    return rows


def _both(bootstrap: str, rng: OffsetRange, **config: Any) -> tuple[list[Any], list[Any]]:
    """(new reader's rows, kafka-python reader's rows) of one range, headers included."""
    settings_ = {"isolation_level": "read_committed", **config}
    new = _rows(read_range(rng, (bootstrap,), settings_, fail_on_data_loss=True, poll_timeout_ms=20_000,
                           include_headers=True))
    old = _rows(to_record_batch(records, True) for records in read_with_kafka_python(
        rng, (bootstrap,), settings_, fail_on_data_loss=True, poll_timeout_ms=20_000))
    return new, old


def _topic_rows(bootstrap: str, topic: str, partitions: int, end: int, **config: Any) -> tuple[list[Any], list[Any]]:
    new, old = [], []
    for p in range(partitions):
        n, o = _both(bootstrap, OffsetRange(topic, p, 0, end), **config)
        new += n
        old += o
    return new, old


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_batches_of_every_codec(broker: BrokerProcess, new_topic: Callable[..., str], codec: str) -> None:
    topic = new_topic(codec)
    create_topic(broker.bootstrap, topic, 2)
    producer = ck_producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 20})
    for i in range(600):
        producer.produce(topic, key=None if i % 5 == 0 else f"k{i}".encode(),
                         value=None if i % 11 == 3 else b"x" * (i % 200), partition=i % 2,
                         headers=[("trace", str(i).encode()), ("empty", None)] if i % 3 == 0 else None,
                         timestamp=BASE_TS + i)
    ck_flush(producer)
    new, old = _topic_rows(broker.bootstrap, topic, 2, 300)
    assert len(new) == 600
    assert new == old


def test_transactions_read_committed_and_uncommitted(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **CK_PRODUCER, "transactional.id": topic,
                         "linger.ms": 5})
    producer.init_transactions(20)
    for round_ in range(4):
        producer.begin_transaction()
        for i in range(25):
            producer.produce(topic, value=f"{round_}-{i}".encode(), partition=0)
        producer.flush(20)
        if round_ % 2:
            producer.abort_transaction(20)
        else:
            producer.commit_transaction(20)
    end = 4 * 25 + 4  # four markers
    committed, old_committed = _both(broker.bootstrap, OffsetRange(topic, 0, 0, end))
    assert [r[3] for r in committed] == [f"{r}-{i}".encode() for r in (0, 2) for i in range(25)]
    assert committed == old_committed
    everything, old_everything = _both(broker.bootstrap, OffsetRange(topic, 0, 0, end),
                                       isolation_level="read_uncommitted")
    assert len(everything) == 100 and everything == old_everything


def test_a_partition_fetch_limit_below_a_batch_still_reads_it(broker: BrokerProcess,
                                                            new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    with kp_producer(broker.bootstrap, linger_ms=50, batch_size=200_000) as producer:
        for i in range(300):
            producer.send(topic, value=b"y" * 500, key=str(i).encode(), partition=0)
        producer.flush(20)
    new, old = _both(broker.bootstrap, OffsetRange(topic, 0, 0, 300), max_partition_fetch_bytes=1000)
    assert len(new) == 300 and new == old


# kafka-python sends neither a record without key and value nor a null header value
record = st.tuples(st.none() | st.binary(max_size=30), st.binary(max_size=300) | st.none(),
                   st.lists(st.tuples(st.text(min_size=1, max_size=8), st.binary(max_size=10)), max_size=2),
                   st.integers(0, 2), st.none() | st.integers(BASE_TS - 10**9, BASE_TS))


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(records=st.lists(record, min_size=1, max_size=120), cuts=st.lists(st.integers(0, 120), min_size=6,
                                                                          max_size=6))
def test_any_records_and_ranges_read_as_the_old_reader_read_them(broker: BrokerProcess, records: list[Any],
                                                                 cuts: list[int]) -> None:
    topic = f"fetch-reader-property-{time.monotonic_ns()}"
    create_topic(broker.bootstrap, topic, 3)
    with kp_producer(broker.bootstrap, linger_ms=10) as producer:
        for key, value, headers, partition, ts in records:
            value = b"" if key is None and value is None else value
            producer.send(topic, key=key, value=value, headers=headers, partition=partition, timestamp_ms=ts)
        producer.flush(20)
    for p in range(3):
        size = sum(1 for r in records if r[3] == p)
        start, stop = sorted((cuts[2 * p] % (size + 1), cuts[2 * p + 1] % (size + 1)))
        new, old = _both(broker.bootstrap, OffsetRange(topic, p, start, stop))
        assert new == old
        assert len(new) == stop - start
