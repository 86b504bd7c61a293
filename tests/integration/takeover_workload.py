"""The workload and the observations both takeover directions share (issue 30): what is written into one
broker (topics with configs, idempotent records with headers and timestamps, committed and aborted
transactions, a transaction left open, committed group offsets, ACLs, a SCRAM user, dynamic broker configs)
and what a broker is seen to serve afterwards, through stock clients (confluent-kafka).

`tests/integration/test_kafka_takeover.py` fills Apache Kafka and looks at pybroker on its dirs;
`tests/integration/test_kraft_export.py` fills pybroker and looks at Kafka on its dirs. Blocking; the test's
thread.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

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
from tests.integration.clients import ck_admin, ck_consumer, ck_flush, ck_producer, close_clients
from tests.kafka_tools import runner

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
#: the user's client quotas, set with Kafka's kafka-configs (confluent-kafka's Python admin has no quota calls)
QUOTAS = "consumer_byte_rate=2048.0,producer_byte_rate=1024.0"
#: one group's share and streams keys (Kafka keeps them as one GROUP config resource) and a client-metrics
#: subscription (a CLIENT_METRICS config resource), set and read with Kafka's kafka-configs
CONFIG_GROUP, GROUP_CONFIGS = "tk-settings", "share.record.lock.duration.ms=45000,streams.num.standby.replicas=1"
SUBSCRIPTION, SUBSCRIPTION_CONFIGS = "tk-metrics", "metrics=org.apache.kafka.producer.,interval.ms=60000"
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
    #: kafka-configs' quota lines for the user
    quotas: list[str] = field(default_factory=list)
    #: kafka-configs' config lines (sorted) of the group configs and of the client-metrics subscription
    group_configs: list[str] = field(default_factory=list)
    client_metrics: list[str] = field(default_factory=list)


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def topic_ids(host: str, port: int) -> dict[str, uuid.UUID]:
    """Every topic's id from a Metadata v12 answer (the stock Python clients do not show ids)."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(encode_request(MetadataRequest(topics=None), 12, 1))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        answer = decode_response(_recv(sock, size), MetadataRequest.API_KEY, 12)[1]
    assert isinstance(answer, MetadataResponse)
    return {t.name: t.topic_id for t in answer.topics if t.name and not t.name.startswith("__")}


def read_all(bootstrap: str, topic: str, isolation: str, timeout: float = 30.0) -> list[tuple[Any, ...]]:
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


def quota_lines(bootstrap: str) -> list[str]:
    """kafka-configs' quota lines for the user (its SCRAM line lists mechanisms in no fixed order)."""
    result = runner.run("kafka-configs", bootstrap, "--bootstrap-server", "{bootstrap}", "--describe",
                        "--entity-type", "users", "--entity-name", USER).check()
    return [line for line in result.lines if line.startswith("Quota configs")]


def config_lines(bootstrap: str, entity_type: str, name: str) -> list[str]:
    """kafka-configs' config lines for one entity, synonyms and all (sorted: the two brokers may list them in
    other orders)."""
    result = runner.run("kafka-configs", bootstrap, "--bootstrap-server", "{bootstrap}", "--describe",
                        "--entity-type", entity_type, "--entity-name", name).check()
    return sorted(line.strip() for line in result.lines if line.startswith("  ") and "=" in line)


def observe(bootstrap: str, host: str, port: int) -> Seen:
    seen = Seen(topic_ids=topic_ids(host, port))
    for topic in PARTITIONS:
        for isolation in ("read_committed", "read_uncommitted"):
            seen.records[isolation, topic] = read_all(bootstrap, topic, isolation)
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
    seen.quotas = quota_lines(bootstrap)
    seen.group_configs = config_lines(bootstrap, "groups", CONFIG_GROUP)
    seen.client_metrics = config_lines(bootstrap, "client-metrics", SUBSCRIPTION)
    return seen


def fill(bootstrap: str) -> None:
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
    runner.run("kafka-configs", bootstrap, "--bootstrap-server", "{bootstrap}", "--alter", "--add-config", QUOTAS,
               "--entity-type", "users", "--entity-name", USER).check()
    for entity_type, name, configs in (("groups", CONFIG_GROUP, GROUP_CONFIGS),
                                       ("client-metrics", SUBSCRIPTION, SUBSCRIPTION_CONFIGS)):
        runner.run("kafka-configs", bootstrap, "--bootstrap-server", "{bootstrap}", "--alter", "--add-config",
                   configs, "--entity-type", entity_type, "--entity-name", name).check()
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


def open_transaction(bootstrap: str) -> None:
    """Leave a transaction open (its records written, no commit or abort) as Kafka stops."""
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(OPEN, num_partitions=1, replication_factor=1)])[OPEN].result(30)
    producer = ck_producer(bootstrap, **{"transactional.id": OPEN, "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(OPEN, value=b"open1")
    ck_flush(producer)


