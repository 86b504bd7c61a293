"""pybroker started on a stopped Apache Kafka 4 node's log dir serves what Kafka served (issue 30, Kafka to
pybroker): the same topics with the same ids and configs, the same records at the same offsets with the
same timestamps and headers, aborted transactions hidden from read_committed, the committed group offsets.
Kafka's answers before it stopped are the oracle; pybroker's after the takeover must equal them.

One Kafka node and one pybroker share the module (a JVM start is 8-12 s on two cores).
"""

from __future__ import annotations

import hashlib
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from pybroker.protocol.frame_codec import decode_response, encode_request
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataResponse
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_consumer, ck_flush, ck_producer, close_clients
from tests.kafka_node import KafkaNode, missing_reason, required

pytestmark = [pytest.mark.slow, pytest.mark.hang_limit(240)]

CONF = "tk-conf"          # 2 partitions, topic configs, idempotent records with headers
COMPACTED = "tk-compacted"
TXN = "tk-txn"            # committed and aborted transactions
OPEN = "tk-open"          # a transaction still open when Kafka stops
GROUP = "tk-group"
TOPIC_CONFIGS = {CONF: {"retention.ms": "123456789", "max.message.bytes": "200000"},
                 COMPACTED: {"cleanup.policy": "compact"}}
PARTITIONS = {CONF: 2, COMPACTED: 1, TXN: 1}
COMMITTED = {(CONF, 0): 7, (CONF, 1): 3}
#: dynamic broker configs set on Kafka's node 1 (the Admin clients cannot name the cluster-wide default;
#: Kafka's storage format writes min.insync.replicas there, so that layer is checked with it)
BROKER_CONFIGS = {"log.retention.ms": "7200000", "log.cleaner.threads": "2"}
CLUSTER_DEFAULT = {"min.insync.replicas": "1"}
USER, PASSWORD = "tk-alice", "tk-Pw-5be1c0"
#: both brokers check ACLs; the PLAINTEXT clients of the harness are ANONYMOUS, a super user
SECURITY = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS"}
ACLS = [AclBinding(ResourceType.TOPIC, CONF, ResourcePatternType.LITERAL, f"User:{USER}", "*", op,
                   AclPermissionType.ALLOW) for op in (AclOperation.READ, AclOperation.DESCRIBE)]
ACLS.append(AclBinding(ResourceType.GROUP, "tk-", ResourcePatternType.PREFIXED, f"User:{USER}", "*",
                       AclOperation.READ, AclPermissionType.ALLOW))


@dataclass
class Seen:
    """What one broker answered: the oracle (Kafka) or the one under test (pybroker)."""

    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    #: (isolation, topic) -> [(partition, offset, timestamp, key, value, headers)]
    records: dict[tuple[str, str], list[tuple[Any, ...]]] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    acls: set[str] = field(default_factory=set)
    #: key -> (value, source name) of the node's broker configs set dynamically on Kafka
    broker_configs: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: user -> sorted (mechanism, iterations)
    scram: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _topic_ids(host: str, port: int) -> dict[str, uuid.UUID]:
    """Every topic's id from a Metadata v12 answer (the stock Python clients do not show ids)."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(encode_request(MetadataRequest(topics=None), 12, 1))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        answer = decode_response(_recv(sock, size), MetadataRequest.API_KEY, 12)[1]
    assert isinstance(answer, MetadataResponse)
    return {t.name: t.topic_id for t in answer.topics if t.name and not t.name.startswith("__")}


def _read_all(bootstrap: str, topic: str, isolation: str, timeout: float = 30.0) -> list[tuple[Any, ...]]:
    """Every record of every partition from offset 0 to the end the isolation level lets a consumer see."""
    partitions = PARTITIONS.get(topic, 1)
    got: list[tuple[Any, ...]] = []
    at_end: set[int] = set()
    with ck_consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True}) as consumer:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.3):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition())
                    continue
                at_end.discard(message.partition())
                got.append((message.partition(), message.offset(), message.timestamp(), message.key(),
                            message.value(), message.headers()))
    assert len(at_end) == partitions, f"{topic}: the end of only {sorted(at_end)} within {timeout}s"
    return sorted(got, key=lambda r: (r[0], r[1]))


def _observe(bootstrap: str, host: str, port: int) -> Seen:
    seen = Seen(topic_ids=_topic_ids(host, port))
    for topic in PARTITIONS:
        for isolation in ("read_committed", "read_uncommitted"):
            seen.records[isolation, topic] = _read_all(bootstrap, topic, isolation)
    admin = ck_admin(bootstrap)
    for topic in TOPIC_CONFIGS:
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        entries = next(iter(described.values())).result(20)
        seen.configs[topic] = {name: entry.value for name, entry in entries.items()
                               if name in TOPIC_CONFIGS[topic]}
    node = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = next(iter(admin.describe_configs([node]).values())).result(20)
    keys = {*BROKER_CONFIGS, *CLUSTER_DEFAULT}
    seen.broker_configs = {name: (entry.value, ConfigSource(entry.source).name)
                           for name, entry in entries.items() if name in keys}
    wanted = [TopicPartition(t, p) for t, p in COMMITTED]
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP, wanted)])[GROUP].result(20)
    seen.committed = {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    seen.acls = {str(b) for b in admin.describe_acls(everything).result(20)}
    users = admin.describe_user_scram_credentials([USER])
    seen.scram = {user: sorted((i.mechanism.name, i.iterations) for i in future.result(20).scram_credential_infos)
                  for user, future in users.items()}
    return seen


def _fill(bootstrap: str) -> None:
    """Topics, idempotent records with headers and timestamps, committed and aborted transactions, offsets."""
    admin = ck_admin(bootstrap)
    futures = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1,
                                            config=TOPIC_CONFIGS.get(t, {})) for t, n in PARTITIONS.items()])
    for future in futures.values():
        future.result(30)
    upserts = [UserScramCredentialUpsertion(USER, ScramCredentialInfo(mechanism, 4096), PASSWORD.encode())
               for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
    for upsert in upserts:  # Kafka refuses one user twice in a request (DUPLICATE_RESOURCE)
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
    for future in admin.create_acls(ACLS).values():
        future.result(30)
    resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in BROKER_CONFIGS.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    idempotent = ck_producer(bootstrap, **{"enable.idempotence": True})
    for i in range(20):
        idempotent.produce(CONF, value=b"v%d" % i, key=b"k%d" % (i % 5), partition=i % 2,
                           timestamp=1_700_000_000_000 + i * 1000, headers=[("h", b"x%d" % i), ("n", None)])
        idempotent.produce(COMPACTED, value=b"c%d" % i, key=b"key%d" % (i % 3))
    ck_flush(idempotent)
    txn = ck_producer(bootstrap, **{"transactional.id": "tk-txn-producer"})
    txn.init_transactions(30)
    for commit, values in ((True, [b"t1", b"t2", b"t3"]), (False, [b"aborted1", b"aborted2"]), (True, [b"t4"])):
        txn.begin_transaction()
        for value in values:
            txn.produce(TXN, value=value, headers=[("txn", b"yes")], timestamp=1_700_000_100_000)
        if commit:
            txn.commit_transaction(30)
        else:
            ck_flush(txn)
            txn.abort_transaction(30)
    with ck_consumer(bootstrap, **{"group.id": GROUP}) as consumer:
        deadline = time.monotonic() + 60  # a fresh node's group coordinator loads first (NOT_COORDINATOR)
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in COMMITTED.items()],
                                asynchronous=False)
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    close_clients()


def _open_transaction(bootstrap: str) -> None:
    """Leave a transaction open (its records written, no commit or abort) as Kafka stops."""
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(OPEN, num_partitions=1, replication_factor=1)])[OPEN].result(30)
    producer = ck_producer(bootstrap, **{"transactional.id": OPEN, "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(OPEN, value=b"open1")
    ck_flush(producer)


def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


@dataclass
class Takeover:
    kafka: Seen
    pybroker: Seen
    data: Path
    metadata_before: dict[str, str]
    broker: BrokerProcess


@pytest.fixture(scope="module")
def takeover(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Takeover]:
    reason = missing_reason()
    if reason is not None:
        if required():
            pytest.fail(reason)
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("kafka-takeover")
    node = KafkaNode(workdir / "kafka", dict(SECURITY))
    node.start()
    try:
        bootstrap = f"127.0.0.1:{node.port}"
        _fill(bootstrap)
        oracle = _observe(bootstrap, "127.0.0.1", node.port)
        _open_transaction(bootstrap)
    finally:
        close_clients()
        node.stop()
    data = workdir / "kafka" / "data"
    stray = data / "tk-unknown-0"  # a partition dir the metadata does not name
    stray.mkdir()
    (stray / "00000000000000000000.log").write_bytes(b"")
    before = _digest(data / "__cluster_metadata-0")
    broker = BrokerProcess(workdir / "pybroker", {**SECURITY, "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"},
                           log_dirs=[data], extra_listeners=["SASL_PLAINTEXT"]).start()
    try:
        seen = _observe(broker.bootstrap, broker.host, broker.port)
        yield Takeover(oracle, seen, data, before, broker)
    finally:
        close_clients()
        broker.close()


def test_same_topics_and_ids(takeover: Takeover) -> None:
    assert set(takeover.kafka.topic_ids) == set(PARTITIONS)
    ids = dict(takeover.pybroker.topic_ids)
    assert ids.pop(OPEN, None) is not None  # made after the oracle's look
    assert ids == takeover.kafka.topic_ids


def test_same_records_at_the_same_offsets(takeover: Takeover) -> None:
    for key, records in takeover.kafka.records.items():
        assert records, key
        assert takeover.pybroker.records[key] == records, key


def test_read_committed_hides_the_aborted_transaction(takeover: Takeover) -> None:
    committed = [r[4] for r in takeover.pybroker.records["read_committed", TXN]]
    everything = [r[4] for r in takeover.pybroker.records["read_uncommitted", TXN]]
    assert committed == [b"t1", b"t2", b"t3", b"t4"]
    assert b"aborted1" in everything and b"aborted2" in everything


def test_committed_group_offsets_and_topic_configs(takeover: Takeover) -> None:
    assert takeover.kafka.committed == COMMITTED
    assert takeover.pybroker.committed == COMMITTED
    assert takeover.kafka.configs == TOPIC_CONFIGS
    assert takeover.pybroker.configs == TOPIC_CONFIGS


def test_kafka_metadata_untouched_and_unknown_partition_set_aside(takeover: Takeover) -> None:
    assert _digest(takeover.data / "__cluster_metadata-0") == takeover.metadata_before
    assert not (takeover.data / "tk-unknown-0").exists()
    assert [p.name for p in takeover.data.iterdir() if p.name.startswith("tk-unknown-0.")
            and p.name.endswith("-stray")]
    assert "took over Apache Kafka's metadata log" in takeover.broker.log_path.read_text()


def test_new_producer_ids_do_not_repeat_kafkas(takeover: Takeover) -> None:
    """Kafka handed out producer ids from its first block; pybroker's first id comes after that block."""
    producer = ck_producer(takeover.broker.bootstrap, **{"enable.idempotence": True})
    producer.produce(CONF, value=b"after", partition=0)
    ck_flush(producer)
    # Kafka's controller handed its broker the block [0, 1000): the block pybroker hands out from now
    # starts at 1000, so the file holds its end, 2000 or more
    assert int((takeover.data / "producer-id-block").read_text()) >= 2000


def test_same_acls_and_scram_users(takeover: Takeover) -> None:
    assert len(takeover.kafka.acls) == len(ACLS)
    assert takeover.pybroker.acls == takeover.kafka.acls
    assert takeover.kafka.scram == {USER: [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)]}
    assert takeover.pybroker.scram == takeover.kafka.scram


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_user_logs_in_and_its_acls_hold(takeover: Takeover, mechanism: str) -> None:
    """The password set on Kafka works on pybroker, and Kafka's ACLs decide what the user may read: the
    allowed topic is served, the other one refused (librdkafka shows no error for an assigned partition it
    may not describe, so the refusal is read from the broker's authorization log)."""
    settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": USER,
                "sasl.password": PASSWORD}
    bootstrap = takeover.broker.bootstrap_of("SASL_PLAINTEXT")
    values: list[bytes] = []
    with ck_consumer(bootstrap, **settings) as consumer:
        consumer.assign([TopicPartition(CONF, 0, 0), TopicPartition(TXN, 0, 0)])
        deadline = time.monotonic() + 30
        while not values and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(num_messages=100, timeout=0.3) if m.error() is None
                       and m.topic() == CONF]
    assert values, "the ACL-allowed topic gave nothing"

    def refused() -> bool:
        return any('"authorization denied"' in line and f'"User:{USER}"' in line and f'"{TXN}"' in line
                   for line in takeover.broker.log_path.read_text(errors="replace").splitlines())

    deadline = time.monotonic() + 10
    while not refused() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert refused(), "reading a topic without an ACL was not refused"
    assert PASSWORD not in takeover.broker.log_path.read_text(errors="replace")


def test_a_transaction_open_at_the_stop_stays_open_until_its_producer_returns(takeover: Takeover) -> None:
    """Kafka's __transaction_state says the transaction is ongoing: pybroker keeps its records from
    read_committed consumers, and the producer's next init (same transactional.id) aborts it, as Kafka would."""
    bootstrap = takeover.broker.bootstrap
    assert [r[4] for r in _read_all(bootstrap, OPEN, "read_uncommitted")] == [b"open1"]
    assert _read_all(bootstrap, OPEN, "read_committed") == []  # held back by the open transaction
    producer = ck_producer(bootstrap, **{"transactional.id": OPEN})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(OPEN, value=b"after-open")
    producer.commit_transaction(30)
    assert [r[4] for r in _read_all(bootstrap, OPEN, "read_committed")] == [b"after-open"]
    assert [r[4] for r in _read_all(bootstrap, OPEN, "read_uncommitted")] == [b"open1", b"after-open"]


def test_dynamic_broker_configs(takeover: Takeover) -> None:
    """Kafka's per-node and cluster-wide dynamic broker configs hold on pybroker, from the same layer."""
    assert takeover.kafka.broker_configs == {
        **{key: (value, "DYNAMIC_BROKER_CONFIG") for key, value in BROKER_CONFIGS.items()},
        **{key: (value, "DYNAMIC_DEFAULT_BROKER_CONFIG") for key, value in CLUSTER_DEFAULT.items()}}
    assert takeover.pybroker.broker_configs == takeover.kafka.broker_configs
