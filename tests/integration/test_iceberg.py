"""Iceberg topics end to end: a topic with iceberg.mode=key_value becomes a table that pyiceberg and DuckDB read.

Real parts only: a pybroker process, stock producers (librdkafka, transactional too), the worker process
the broker starts, pyiceberg's SQL catalog on SQLite, DuckDB's iceberg extension, and for the
object-store test a SeaweedFS server (`tests/integration/seaweedfs.py`). Exactly once is checked the
hard way: the worker and then the broker are killed with SIGKILL while records stream in, and the table
must hold each (partition, offset) a read_committed consumer sees, once.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from kafka import KafkaConsumer, TopicPartition

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import KP_CONSUMER, ck_admin, ck_producer
from tests.integration.iceberg_tables import broker_catalog, coordinates, duckdb_with_iceberg, wait_rows
from tests.integration.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3
from tests.integration.txn_clients import TXN_OVERRIDES, ck_txn_producer

pytestmark = pytest.mark.slow

NAMESPACE = "pybroker"
FAST = {"iceberg.mode": "key_value", "iceberg.commit.interval.ms": "200"}


def make_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                  config=configs or FAST)])[topic].result(15)


def log_coordinates(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    """(partition, offset) of every record a read_committed consumer reads, up to the end offsets now."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", **KP_CONSUMER)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                got += [(tp.partition, r.offset) for r in records]
        return got
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def iceberg_broker(tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess:
    proc = BrokerProcess(tmp_path_factory.mktemp("iceberg"), TXN_OVERRIDES).start()
    try:
        yield proc  # type: ignore[misc]
        proc.stop()
    finally:
        proc.close()


def test_key_value_topic_is_a_table_that_pyiceberg_and_duckdb_read(iceberg_broker: BrokerProcess,
                                                                   new_topic: Callable[[str], str]) -> None:
    topic = new_topic("kv")
    make_topic(iceberg_broker.bootstrap, topic, 3)
    producer = ck_producer(iceberg_broker.bootstrap, acks="all", **{"linger.ms": 5})
    for i in range(3000):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 3,
                         headers=[("n", str(i).encode())] if i % 2 else None)
    producer.produce(topic, key=None, value=None, partition=0)
    assert producer.flush(30) == 0
    txn = ck_txn_producer(iceberg_broker.bootstrap, f"{topic}-txn")
    txn.init_transactions(30)
    for label, count, commit in (("committed", 100, True), ("aborted", 50, False), ("late", 10, True)):
        txn.begin_transaction()
        for i in range(count):
            txn.produce(topic, value=f"{label}-{i}".encode(), partition=i % 3)
        (txn.commit_transaction if commit else txn.abort_transaction)(30)
    expected = 3001 + 110

    catalog = broker_catalog(iceberg_broker.log_dirs[0])
    table = wait_rows(catalog, (NAMESPACE, topic), expected)
    rows = table.scan().to_arrow()
    assert rows.num_rows == expected
    values = rows["value"].to_pylist()
    assert not [v for v in values if v is not None and v.startswith(b"aborted")]
    assert {f"committed-{i}".encode() for i in range(100)} <= set(values)
    assert {f"v{i}".encode() for i in range(3000)} <= set(values)
    coords = coordinates(table)
    assert len(set(coords)) == len(coords) == expected
    by_value = {r["value"]: r["kafka"] for r in rows.to_pylist()}
    assert by_value[b"v7"]["headers"] == [{"key": "n", "value": b"7"}]
    assert by_value[b"v7"]["key"] == b"k7" and by_value[b"v7"]["partition"] == 1
    assert by_value[None]["key"] is None
    assert str(table.spec().fields[0].transform) == "hour"

    con = duckdb_with_iceberg()
    count, distinct, top = con.execute(
        "SELECT count(*), count(DISTINCT (kafka.partition, kafka.offset)), max(kafka.offset) "
        "FROM iceberg_scan(?)", [table.metadata_location]).fetchone()
    assert (count, distinct) == (expected, expected)
    assert top == max(o for _, o in coords)

    # the table lists exactly what a read_committed consumer reads
    assert sorted(coords) == sorted(log_coordinates(iceberg_broker.bootstrap, topic, 3))


def test_a_topic_without_iceberg_mode_gets_no_table(iceberg_broker: BrokerProcess,
                                                    new_topic: Callable[[str], str]) -> None:
    plain, kept = new_topic("plain"), new_topic("kept")
    make_topic(iceberg_broker.bootstrap, plain, 1, {"iceberg.mode": "disabled"})
    make_topic(iceberg_broker.bootstrap, kept, 1)
    producer = ck_producer(iceberg_broker.bootstrap, acks="all")
    for topic in (plain, kept):
        producer.produce(topic, value=b"x")
    assert producer.flush(30) == 0
    catalog = broker_catalog(iceberg_broker.log_dirs[0])
    wait_rows(catalog, (NAMESPACE, kept), 1)  # a round after both were written
    assert (NAMESPACE, plain) not in catalog.list_tables(NAMESPACE)


def _worker_pid(broker: BrokerProcess) -> int:
    found = re.findall(r'"pid": (\d+), "event": "iceberg worker started"', broker.log_path.read_text())
    assert found, "the broker logged no worker start"
    return int(found[-1])


class Stream:
    """A librdkafka producer sending unique values in a thread until stopped (it rides out broker restarts)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = ck_producer(bootstrap, acks="all", **{"linger.ms": 2, "message.timeout.ms": 60_000})
        self.topic, self.partitions = topic, partitions
        self.stop = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, value=f"s{self.sent}".encode(), partition=self.sent % self.partitions)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert self.producer.flush(90) == 0


def test_kill9_of_the_worker_and_of_the_broker_loses_and_doubles_no_row(broker_factory: Callable[..., BrokerProcess],
                                                                        new_topic: Callable[[str], str]) -> None:
    broker = broker_factory(TXN_OVERRIDES, needs_restart=True)
    topic = new_topic("crash")
    make_topic(broker.bootstrap, topic, 2)
    catalog = broker_catalog(broker.log_dirs[0])
    stream = Stream(broker.bootstrap, topic, 2)
    try:
        table = wait_rows(catalog, (NAMESPACE, topic), 300)
        os.kill(_worker_pid(broker), signal.SIGKILL)  # mid-stream: maybe mid-commit
        before = int(table.current_snapshot().summary.additional_properties["total-records"])
        wait_rows(catalog, (NAMESPACE, topic), before + 300)  # a new worker goes on
        broker.restart(kill=True)
        table = catalog.load_table((NAMESPACE, topic))
        before = int(table.current_snapshot().summary.additional_properties["total-records"])
        wait_rows(catalog, (NAMESPACE, topic), before + 300)
    finally:
        stream.finish()
    expected = log_coordinates(broker.bootstrap, topic, 2)
    assert len(expected) >= stream.sent  # every acknowledged record, and those written before a kill
    table = wait_rows(catalog, (NAMESPACE, topic), len(expected))
    coords = coordinates(table)
    assert len(coords) == len(set(coords)), "a row was written twice"
    assert sorted(coords) == sorted(expected)


def test_the_warehouse_on_s3_compatible_object_storage(broker_factory: Callable[..., BrokerProcess],
                                                       new_topic: Callable[[str], str], tmp_path: Path) -> None:
    store = SeaweedS3(tmp_path / "s3").start()
    try:
        store.make_bucket("pybroker-tables")
        s3 = {"iceberg.s3.endpoint": store.endpoint, "iceberg.s3.access.key.id": ACCESS_KEY,
              "iceberg.s3.secret.access.key": SECRET_KEY, "iceberg.warehouse": "s3://pybroker-tables/warehouse"}
        broker = broker_factory(s3)
        topic = new_topic("s3")
        make_topic(broker.bootstrap, topic, 1)
        producer = ck_producer(broker.bootstrap, acks="all")
        for i in range(500):
            producer.produce(topic, value=f"o{i}".encode())
        assert producer.flush(30) == 0
        catalog = broker_catalog(broker.log_dirs[0], warehouse="s3://pybroker-tables/warehouse",
                                 **{"s3.endpoint": store.endpoint, "s3.access-key-id": ACCESS_KEY,
                                    "s3.secret-access-key": SECRET_KEY, "s3.region": "us-east-1"})
        table = wait_rows(catalog, (NAMESPACE, topic), 500)
        assert table.metadata_location.startswith("s3://pybroker-tables/warehouse/")
        assert sorted(table.scan().to_arrow()["value"].to_pylist()) == sorted(f"o{i}".encode() for i in range(500))
        assert SECRET_KEY not in broker.log_path.read_text()  # the secret is never logged
        files = store.filesystem().get_file_info(__import__("pyarrow.fs").fs.FileSelector(
            "pybroker-tables/warehouse", recursive=True))
        assert any(f.path.endswith(".parquet") for f in files)
    finally:
        store.stop()
