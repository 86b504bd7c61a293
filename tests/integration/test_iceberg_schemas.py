"""Iceberg topics that decode values by their registered schema, end to end.

Real parts only: a pybroker process with its schema registry on (`schema.registry.port=0`), confluent-kafka's
SchemaRegistryClient and AvroSerializer (two compatible versions of a schema, the second adding a field),
raw producers of unframed and garbage values, the worker process the broker starts (killed with SIGKILL
mid-stream), pyiceberg and DuckDB reading the typed columns. Each record must be, once, in the table
(decoded) or in the dead-letter table (with its raw value), as the producer's delivery reports place it.
"""

from __future__ import annotations

import decimal
import json
import os
import re
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message
from confluent_kafka.admin import NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_producer
from tests.integration.iceberg_tables import broker_catalog, coordinates, duckdb_with_iceberg, wait_rows

pytestmark = pytest.mark.slow

NAMESPACE = "pybroker"
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "int"}, {"name": "item", "type": "string"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}
#: compatible (BACKWARD): id widened from int to long, and a new field with a default
ORDER_V2 = {**ORDER_V1, "fields": [{"name": "id", "type": "long"}, *ORDER_V1["fields"][1:],  # type: ignore[misc]
                                   {"name": "coupon", "type": ["null", "string"], "default": None}]}
V1, V2 = json.dumps(ORDER_V1), json.dumps(ORDER_V2)
GARBAGE = [b"plain text", b"\x00\x00\x00\x7f\x7f+unknown id", b"\x00", b"{\"json\": true}"]


def _registry_port(broker: BrokerProcess) -> int:
    found = re.findall(r'"port": (\d+), "event": "schema registry listening"', broker.log_path.read_text())
    assert found, "the broker logged no registry port"
    return int(found[-1])


def _worker_pid(broker: BrokerProcess) -> int:
    found = re.findall(r'"pid": (\d+), "event": "iceberg worker started"', broker.log_path.read_text())
    assert found, "the broker logged no worker start"
    return int(found[-1])


def table_rows(catalog: Any, topic: str) -> int:
    snapshot = catalog.load_table((NAMESPACE, topic)).current_snapshot()
    return int(snapshot.summary.additional_properties["total-records"])


class Stream:
    """Orders in v1 then v2, with garbage among them, sent from a thread; each delivery's place and kind kept."""

    def __init__(self, broker: BrokerProcess, registry: SchemaRegistryClient, topic: str) -> None:
        self.producer = ck_producer(broker.bootstrap, acks="all", **{"linger.ms": 2})
        self.topic = topic
        self.serializers = [AvroSerializer(registry, V1), AvroSerializer(registry, V2)]
        self.version = 0
        self.delivered: dict[tuple[int, int], tuple[str, Any]] = {}
        self.stop = threading.Event()
        self.sent = 0
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_delivery(self, kind: str, detail: Any) -> Callable[[KafkaError | None, Message], None]:
        def done(error: KafkaError | None, message: Message) -> None:
            assert error is None, error
            self.delivered[(message.partition(), message.offset())] = (kind, detail)
        return done

    def _run(self) -> None:
        try:
            self._send()
        except BaseException as exc:  # the test says it, not a silent thread
            self.failure = exc

    def _send(self) -> None:
        while not self.stop.is_set():
            i = self.sent
            if i % 25 == 24:
                kind, detail, value = "dead", GARBAGE[i % len(GARBAGE)], GARBAGE[i % len(GARBAGE)]
            else:
                order = {"id": i, "item": f"item{i}", "price": decimal.Decimal(f"{i}.50"), "tags": ["x"]}
                if self.version:
                    order["coupon"] = f"c{i}"
                value = self.serializers[self.version](order, SerializationContext(self.topic, MessageField.VALUE))
                kind, detail = f"v{self.version + 1}", order
            try:
                self.producer.produce(self.topic, value=value, partition=i % 2,
                                      on_delivery=self._on_delivery(kind, detail))
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert self.producer.flush(90) == 0
        assert self.failure is None, self.failure


def test_avro_values_become_typed_columns_that_evolve_and_garbage_goes_to_the_dead_letter_table(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[[str], str]) -> None:
    broker = broker_factory({"schema.registry.port": "0"})
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{_registry_port(broker)}"})
    topic = new_topic("orders")
    admin = ck_admin(broker.bootstrap)  # kept: the future fails when its client is collected
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1, config={
        "iceberg.mode": "value_schema_id_prefix", "iceberg.commit.interval.ms": "200"})])[topic].result(15)
    catalog = broker_catalog(broker.log_dirs[0])
    stream = Stream(broker, registry, topic)
    try:
        wait_rows(catalog, (NAMESPACE, topic), 200)
        os.kill(_worker_pid(broker), signal.SIGKILL)  # mid-stream: maybe between the two tables' commits
        stream.version = 1  # the second schema registers on its first use
        table = wait_rows(catalog, (NAMESPACE, topic), 200 + table_rows(catalog, topic))
        wait_rows(catalog, (NAMESPACE, topic + "~dlq"), 10)
    finally:
        stream.finish()
        registry.__exit__()

    good = sorted(at for at, (kind, _) in stream.delivered.items() if kind != "dead")
    dead = sorted(at for at, (kind, _) in stream.delivered.items() if kind == "dead")
    table = wait_rows(catalog, (NAMESPACE, topic), len(good))
    dlq = wait_rows(catalog, (NAMESPACE, topic + "~dlq"), len(dead))
    rows, dead_rows = coordinates(table), coordinates(dlq)
    assert len(rows) == len(set(rows)) and len(dead_rows) == len(set(dead_rows)), "a row was written twice"
    assert sorted(rows) == good and sorted(dead_rows) == dead

    fields = {f.name: str(f.field_type) for f in table.schema().fields}
    assert fields["id"] == "long" and fields["coupon"] == "string" and fields["price"] == "decimal(10, 2)"
    for row in table.scan().to_arrow().to_pylist():
        kind, order = stream.delivered[(row["kafka"]["partition"], row["kafka"]["offset"])]
        assert (row["id"], row["item"], row["price"], row["tags"]) == (order["id"], order["item"], order["price"],
                                                                       order["tags"])
        assert row["coupon"] == (order["coupon"] if kind == "v2" else None)
    for row in dlq.scan().to_arrow().to_pylist():
        assert row["value"] == stream.delivered[(row["kafka"]["partition"], row["kafka"]["offset"])][1]
        assert row["reason"]

    con = duckdb_with_iceberg()
    count, ids, coupons = con.execute("SELECT count(*), sum(id), count(coupon) FROM iceberg_scan(?)",
                                      [table.metadata_location]).fetchone()
    orders = [o for k, o in stream.delivered.values() if k != "dead"]
    assert (count, ids, coupons) == (len(good), sum(o["id"] for o in orders), sum("coupon" in o for o in orders))


def _order_class() -> Any:
    """A Protobuf message class made at run time (no protoc): `shop.Order` with an enum, a nested message, a
    repeated field and a well-known Timestamp, in a file of its own that imports timestamp.proto."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    well_known = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(well_known)
    pool.Add(well_known)
    file = descriptor_pb2.FileDescriptorProto(name="shop_order.proto", package="shop", syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    order = file.message_type.add(name="Order")
    kind = order.enum_type.add(name="Kind")
    kind.value.add(name="VIEW", number=0)
    kind.value.add(name="BUY", number=1)
    place = order.nested_type.add(name="Place")
    place.field.add(name="city", number=1, type=9, label=1)
    F = descriptor_pb2.FieldDescriptorProto
    order.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.field.add(name="item", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="kind", number=3, type=F.TYPE_ENUM, type_name=".shop.Order.Kind", label=F.LABEL_OPTIONAL)
    order.field.add(name="where", number=4, type=F.TYPE_MESSAGE, type_name=".shop.Order.Place", label=F.LABEL_OPTIONAL)
    order.field.add(name="sizes", number=5, type=F.TYPE_INT32, label=F.LABEL_REPEATED)
    order.field.add(name="at", number=6, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                    label=F.LABEL_OPTIONAL)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_values_from_confluents_serializer_become_typed_columns(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[[str], str]) -> None:
    import datetime

    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    broker = broker_factory({"schema.registry.port": "0"})
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{_registry_port(broker)}"})
    topic = new_topic("proto")
    admin = ck_admin(broker.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config={
        "iceberg.mode": "value_schema_id_prefix", "iceberg.commit.interval.ms": "200"})])[topic].result(15)
    order_class = _order_class()
    serialize = ProtobufSerializer(order_class, registry, {"use.deprecated.format": False})
    producer = ck_producer(broker.bootstrap, acks="all")
    at = datetime.datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=datetime.UTC)
    for i in range(20):
        order = order_class(id=i, item=f"item{i}", kind=i % 2, sizes=[i, i + 1])
        if i % 2:
            order.where.city = "Lyon"
        order.at.FromDatetime(at)
        producer.produce(topic, key=f"k{i}".encode(),
                         value=serialize(order, SerializationContext(topic, MessageField.VALUE)))
    producer.produce(topic, key=b"k0", value=None)  # a tombstone: a row, not a dead letter
    assert producer.flush(30) == 0
    table = wait_rows(broker_catalog(broker.log_dirs[0]), (NAMESPACE, topic), 21)
    fields = {f.name: str(f.field_type) for f in table.schema().fields}
    assert fields["id"] == "long" and fields["kind"] == "string" and fields["at"] == "timestamptz", fields
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["kafka"]["offset"])
    assert [r["id"] for r in rows[:20]] == list(range(20)) and rows[20]["id"] is None
    assert rows[1]["kind"] == "BUY" and rows[1]["where"] == {"city": "Lyon"} and rows[0]["where"] is None
    assert rows[3]["sizes"] == [3, 4] and rows[3]["at"] == at and rows[20]["kafka"]["key"] == b"k0"
