"""The schema registry end to end: confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and
Protobuf serializers against a real broker process, produce -> consume; subjects and ids through a clean
restart and a kill -9; validation on produce refusing unframed records seen by a stock producer."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.brokers import BrokerProcess, free_port

AVRO_V1 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                      "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
AVRO_V2 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                      "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                                 {"name": "qty", "type": "int", "default": 1}]})
AVRO_BAD = json.dumps({"type": "record", "name": "Order", "namespace": "shop",  # item: string -> int
                       "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "int"}]})
JSON_SCHEMA = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Point", "type": "object",
                          "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                          "required": ["x", "y"]})


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("registry"), {"schema.registry.port": str(free_port())})
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


def url_of(broker: BrokerProcess) -> str:
    return f"http://127.0.0.1:{broker.overrides['schema.registry.port']}"


_OPEN: list[SchemaRegistryClient] = []


@pytest.fixture(autouse=True)
def _close_registry_clients() -> Iterator[None]:
    """Each test's registry clients are closed after it (their HTTP sockets would warn in the next test)."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def client(broker: BrokerProcess) -> SchemaRegistryClient:
    opened = SchemaRegistryClient({"url": url_of(broker)})
    _OPEN.append(opened)
    return opened


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(broker: BrokerProcess, topic: str, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs or {})]).values():
        future.result(30)


def round_trip(broker: BrokerProcess, topic: str, serializer: Any, deserializer: Any, values: list[Any]) -> list[Any]:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name("g"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: list[Any] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            seen.append(deserializer(message.value(), SerializationContext(topic, MessageField.VALUE)))
            if len(seen) == len(values):
                break
    finally:
        consumer.close()
    return seen


def http(broker: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url_of(broker) + path, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_avro_serializer_round_trip_and_compatibility(registry_broker: BrokerProcess) -> None:
    topic = name("orders")
    create_topic(registry_broker, topic)
    registry = client(registry_broker)
    serializer = AvroSerializer(registry, AVRO_V1)
    deserializer = AvroDeserializer(registry)
    values = [{"id": i, "item": f"thing {i}"} for i in range(5)]
    assert round_trip(registry_broker, topic, serializer, deserializer, values) == values
    subject = f"{topic}-value"
    assert subject in registry.get_subjects()
    latest = registry.get_latest_version(subject)
    assert latest.version == 1
    assert registry.register_schema(subject, Schema(AVRO_V2, "AVRO")) > latest.schema_id
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema(subject, Schema(AVRO_BAD, "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert registry.get_versions(subject) == [1, 2]
    # the same schema under another subject keeps its id
    again = registry.register_schema(name("other") + "-value", Schema(AVRO_V1, "AVRO"))
    assert again == latest.schema_id


def test_json_serializer_round_trip(registry_broker: BrokerProcess) -> None:
    topic = name("points")
    create_topic(registry_broker, topic)
    registry = client(registry_broker)
    values = [{"x": 1.5, "y": -2}, {"x": 0, "y": 3}]
    seen = round_trip(registry_broker, topic, JSONSerializer(JSON_SCHEMA, registry),
                      JSONDeserializer(JSON_SCHEMA, schema_registry_client=registry), values)
    assert seen == values
    assert registry.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


def test_protobuf_serializer_round_trip(registry_broker: BrokerProcess) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name=f"{name('sensor')}.proto", package="acme", syntax="proto3")
    message = file.message_type.add(name="Reading")
    message.field.add(name="sensor", number=1, type=9, label=1)
    message.field.add(name="celsius", number=2, type=1, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    reading = message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Reading"))
    topic = name("readings")
    create_topic(registry_broker, topic)
    registry = client(registry_broker)
    values = [reading(sensor="a", celsius=21.5), reading(sensor="b", celsius=-3.0)]
    seen = round_trip(registry_broker, topic, ProtobufSerializer(reading, registry, {"use.deprecated.format": False}),
                      ProtobufDeserializer(reading, {"use.deprecated.format": False}), values)
    assert seen == values
    assert registry.get_latest_version(f"{topic}-value").schema.schema_type == "PROTOBUF"


def test_error_codes_in_confluents_shape(registry_broker: BrokerProcess) -> None:
    subject = name("errors") + "-value"
    assert http(registry_broker, "GET", f"/subjects/{subject}/versions") == (
        404, {"error_code": 40401, "message": f"Subject '{subject}' not found."})
    status, body = http(registry_broker, "POST", f"/subjects/{subject}/versions", {"schema": "{not avro"})
    assert (status, body["error_code"]) == (422, 42201)
    assert http(registry_broker, "POST", f"/subjects/{subject}/versions", {"schema": AVRO_V1})[0] == 200
    assert http(registry_broker, "GET", f"/subjects/{subject}/versions/7")[1]["error_code"] == 40402
    assert http(registry_broker, "GET", f"/subjects/{subject}/versions/x")[1]["error_code"] == 42202
    assert http(registry_broker, "POST", f"/subjects/{subject}", {"schema": AVRO_V2})[1]["error_code"] == 40403
    assert http(registry_broker, "GET", "/schemas/ids/999999")[1]["error_code"] == 40403
    assert http(registry_broker, "PUT", f"/config/{subject}", {"compatibility": "SIDEWAYS"})[1]["error_code"] == 42203
    assert http(registry_broker, "GET", f"/config/{subject}")[1]["error_code"] == 40408
    assert http(registry_broker, "PUT", f"/config/{subject}", {"compatibility": "full"}) == (
        200, {"compatibility": "FULL"})
    assert http(registry_broker, "GET", f"/config/{subject}") == (200, {"compatibilityLevel": "FULL"})
    # soft delete, then permanent
    assert http(registry_broker, "DELETE", f"/subjects/{subject}?permanent=true")[1]["error_code"] == 40405
    assert http(registry_broker, "DELETE", f"/subjects/{subject}") == (200, [1])
    assert http(registry_broker, "GET", f"/subjects/{subject}/versions")[1]["error_code"] == 40401
    assert http(registry_broker, "GET", f"/subjects/{subject}/versions?deleted=true") == (200, [1])
    assert http(registry_broker, "DELETE", f"/subjects/{subject}")[1]["error_code"] == 40404
    assert http(registry_broker, "DELETE", f"/subjects/{subject}?permanent=true") == (200, [1])
    assert http(registry_broker, "GET", f"/subjects/{subject}/versions?deleted=true")[1]["error_code"] == 40401
    # modes
    assert http(registry_broker, "PUT", f"/mode/{subject}", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = http(registry_broker, "POST", f"/subjects/{subject}/versions", {"schema": AVRO_V1})
    assert (status, body["error_code"]) == (422, 42205)
    assert http(registry_broker, "DELETE", f"/mode/{subject}") == (200, {"mode": "READONLY"})
    assert http(registry_broker, "GET", "/mode") == (200, {"mode": "READWRITE"})


def test_subjects_and_ids_survive_restart_and_kill9(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, {"schema.registry.port": str(free_port())})
    broker.start()
    try:
        registry = client(broker)
        first = registry.register_schema("keep-value", Schema(AVRO_V1, "AVRO"))
        second = registry.register_schema("keep-value", Schema(AVRO_V2, "AVRO"))
        registry.set_compatibility("keep-value", "FULL")
        broker.restart()
        registry = client(broker)
        assert registry.get_versions("keep-value") == [1, 2]
        assert registry.get_schema(second).schema_str == json.dumps(json.loads(AVRO_V2), separators=(",", ":"))
        third = registry.register_schema("kill-value", Schema(JSON_SCHEMA, "JSON"))
        broker.restart(kill=True)  # acknowledged registrations are fsynced before the answer
        registry = client(broker)
        assert registry.get_latest_version("kill-value").schema_id == third
        assert [registry.get_version("keep-value", v).schema_id for v in (1, 2)] == [first, second]
        assert http(broker, "GET", "/config/keep-value") == (200, {"compatibilityLevel": "FULL"})
        fourth = registry.register_schema("after-value", Schema(AVRO_BAD.replace("Order", "Other"), "AVRO"))
        assert fourth > third  # ids are not reused after a restart
    finally:
        broker.close()


def test_validation_on_produce_refuses_unframed_records(registry_broker: BrokerProcess) -> None:
    topic = name("checked")
    create_topic(registry_broker, topic, {"confluent.value.schema.validation": "true"})
    registry = client(registry_broker)
    serializer = AvroSerializer(registry, AVRO_V1)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap, "linger.ms": 0})
    framed = serializer({"id": 1, "item": "ok"}, SerializationContext(topic, MessageField.VALUE))
    outcomes: list[Any] = []
    # one record per batch: a refused record refuses its whole batch (the others are marked as innocent)
    for value in (b"plain bytes, no schema id", b"\x00\x00\x0f\x42\x3fnot registered", framed, None):
        producer.produce(topic, value, key=b"k", on_delivery=lambda err, msg: outcomes.append(err))
        assert producer.flush(30) == 0
    assert [err.name() if err else None for err in outcomes] == ["INVALID_RECORD", "INVALID_RECORD", None, None]


def test_basic_auth_with_broker_users_and_acls_on_subjects(tmp_path: Path) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-Pw-71" user_bob="bob-Pw-93";')
    registry_port = free_port()
    broker = BrokerProcess(tmp_path, {
        "schema.registry.port": str(registry_port),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:alice;User:ANONYMOUS",  # ANONYMOUS: the harness's PLAINTEXT readiness check
    }, extra_listeners=["SASL_PLAINTEXT"])
    broker.start()
    try:
        url = f"http://127.0.0.1:{registry_port}"
        anonymous = SchemaRegistryClient({"url": url})
        wrong = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:nope"})
        alice = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:alice-Pw-71"})
        bob = SchemaRegistryClient({"url": url, "basic.auth.user.info": "bob:bob-Pw-93"})
        _OPEN.extend([anonymous, wrong, alice, bob])
        for refused in (anonymous, wrong):
            with pytest.raises(SchemaRegistryError) as unauthorized:
                refused.get_subjects()
            assert unauthorized.value.http_status_code == 401
        schema_id = alice.register_schema("orders-value", Schema(AVRO_V1, "AVRO"))
        assert alice.get_subjects() == ["orders-value"]
        # bob has no ACL on Topic:orders: the subject is hidden from him and he may not register under it
        assert bob.get_subjects() == []
        with pytest.raises(SchemaRegistryError) as denied:
            bob.register_schema("orders-value", Schema(AVRO_V2, "AVRO"))
        assert (denied.value.http_status_code, denied.value.error_code) == (403, 40301)
        with pytest.raises(SchemaRegistryError) as hidden:
            bob.get_schema(schema_id)
        assert hidden.value.error_code == 40403
    finally:
        broker.close()
    assert "alice-Pw-71" not in broker.log_tail(10_000) and "bob-Pw-93" not in broker.log_tail(10_000)


def test_https_with_the_ssl_listeners_key_store(tmp_path: Path) -> None:
    from tests.certs import KEY_PASSWORD, make_certs, openssl_available
    if not openssl_available():
        pytest.skip("needs the openssl command")
    certs = make_certs(tmp_path / "certs")
    registry_port = free_port()
    broker = BrokerProcess(tmp_path / "broker", {
        "schema.registry.port": str(registry_port), "schema.registry.ssl.listener": "SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_keystore_encrypted),
        "ssl.key.password": KEY_PASSWORD}, extra_listeners=["SSL"])
    broker.start()
    try:
        secure = SchemaRegistryClient({"url": f"https://localhost:{registry_port}", "ssl.ca.location": str(certs.ca)})
        _OPEN.append(secure)
        schema_id = secure.register_schema("tls-value", Schema(AVRO_V1, "AVRO"))
        assert secure.get_schema(schema_id).schema_type == "AVRO"
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP is not served there
            urllib.request.urlopen(f"http://127.0.0.1:{registry_port}/subjects", timeout=10).read()
    finally:
        broker.close()


def test_protobuf_text_registered_then_used_by_the_python_serializers(registry_broker: BrokerProcess) -> None:
    """Java clients register .proto text; the Python serializers ask for it as a serialized descriptor."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pool, message_factory

    topic = name("texts")
    create_topic(registry_broker, topic)
    text = ('syntax = "proto3";\npackage shop;\n\nmessage Item {\n  string sku = 1;\n  int32 count = 2;\n'
            '  map<string, string> labels = 3;\n}\n')
    status, body = http(registry_broker, "POST", f"/subjects/{topic}-value/versions",
                        {"schemaType": "PROTOBUF", "schema": text})
    assert status == 200, body
    status, fetched = http(registry_broker, "GET", f"/schemas/ids/{body['id']}?format=serialized")
    assert status == 200 and fetched["schemaType"] == "PROTOBUF"
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(__import__("base64").b64decode(fetched["schema"]))
    item = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Item"))
    registry = client(registry_broker)
    serializer = ProtobufSerializer(item, registry, {"use.deprecated.format": False, "auto.register.schemas": False,
                                                     "use.latest.version": True})
    values = [item(sku="a-1", count=2, labels={"colour": "red"})]
    seen = round_trip(registry_broker, topic, serializer, ProtobufDeserializer(item, {"use.deprecated.format": False}),
                      values)
    assert seen == values


def test_references_referenced_by_and_import_mode(registry_broker: BrokerProcess) -> None:
    base = name("refs")
    address = json.dumps({"type": "record", "name": "Address", "namespace": "geo",
                          "fields": [{"name": "city", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "geo",
                         "fields": [{"name": "home", "type": "geo.Address"}]})
    status, first = http(registry_broker, "POST", f"/subjects/{base}-address/versions", {"schema": address})
    assert status == 200
    reference = [{"name": "geo.Address", "subject": f"{base}-address", "version": 1}]
    assert http(registry_broker, "POST", f"/subjects/{base}-person/versions", {"schema": person})[1]["error_code"] \
        == 42201  # geo.Address is unknown without the reference
    status, second = http(registry_broker, "POST", f"/subjects/{base}-person/versions",
                          {"schema": person, "references": reference})
    assert status == 200
    assert http(registry_broker, "GET", f"/subjects/{base}-address/versions/1/referencedby") == (200, [second["id"]])
    assert http(registry_broker, "GET", f"/schemas/ids/{second['id']}")[1]["references"] == reference
    assert http(registry_broker, "DELETE", f"/subjects/{base}-address")[1]["error_code"] == 42206
    # IMPORT mode: an empty subject takes a given id and version (a copy of another registry)
    target = f"{base}-imported"
    assert http(registry_broker, "POST", f"/subjects/{target}/versions",
                {"schema": address, "id": 900001, "version": 3})[1]["error_code"] == 42205
    assert http(registry_broker, "PUT", f"/mode/{target}", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    status, imported = http(registry_broker, "POST", f"/subjects/{target}/versions",
                            {"schema": json.dumps({"type": "string"}), "id": 900001, "version": 3})
    assert (status, imported) == (200, {"id": 900001, "version": 3})
    assert http(registry_broker, "GET", "/schemas/ids/900001/versions") == (200, [{"subject": target, "version": 3}])
    assert first["id"] != 900001
