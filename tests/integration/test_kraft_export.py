"""Apache Kafka 4.4 takes over a stopped pybroker's log dirs, and the way out of one machine (issue 30, pybroker to
Kafka).

pybroker is filled with the workload of `tests/integration/takeover_workload.py` (plus a client quota),
looked at through stock clients (the oracle), and stopped. Its metadata is already in its live KRaft metadata
log (`storage/metadata_log.py`), so there is no export step; then:

- a combined Kafka node (broker and controller) started on the dirs, unformatted, must serve what pybroker
  served: the same topics and ids, records at the same offsets with the same timestamps and headers, the
  aborted transaction hidden, the open one still open, committed group offsets, topic and broker configs,
  ACLs, SCRAM users and quotas; Kafka's DumpLogSegments decodes pybroker's snapshot and segments without an
  error; pybroker started on the dirs again takes what Kafka changed and goes on appending to Kafka's log;
- `pybroker export-kraft` still writes a snapshot (for a controller-only node's dir);
- the migration (on a copy of the same dirs, exported for a controller-only node): a Kafka controller, Kafka
  broker 1 on pybroker's dirs, broker 2 empty, every partition reassigned to replicas [1, 2] with
  kafka-reassign-partitions, broker 1 stopped: broker 2 alone serves every record and committed offset.

One pybroker, then one combined node, then three JVMs (controller, two brokers), in that order, shared by the
module.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from pybroker.storage.kraft_metadata import read_kraft_metadata
from pybroker.storage.log_dir import read_meta_properties
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_consumer, ck_flush, ck_producer, close_clients
from tests.integration.takeover_workload import (
    ACLS,
    BROKER_CONFIGS,
    COMMITTED,
    CONF,
    GROUP,
    OPEN,
    PARTITIONS,
    PASSWORD,
    SECURITY,
    TOPIC_CONFIGS,
    USER,
    Seen,
    fill,
    observe,
    open_transaction,
    read_all,
    topic_ids,
)
from tests.kafka_node import KafkaNode, free_port, missing_reason, required
from tests.kafka_tools import runner

pytestmark = [pytest.mark.slow, pytest.mark.hang_limit(600)]

CONTROLLER_ID = 3000


def _export(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pybroker.broker.cli", "export-kraft", *args], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@dataclass
class Source:
    """The stopped pybroker: what it served, its dirs, and a copy of them for the migration."""

    seen: Seen
    data: Path
    copy: Path
    cluster_id: str
    next_producer_id: int
    workdir: Path


@dataclass
class OnKafka:
    seen: Seen
    node: KafkaNode
    #: the metadata log as pybroker left it (a copy: Kafka appends to the log)
    left: Path
    sasl_bootstrap: str


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    reason = missing_reason()
    if reason is not None:
        if required():
            pytest.fail(reason)
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("kraft-export")
    data = workdir / "data"
    broker = BrokerProcess(workdir / "pybroker", dict(SECURITY), log_dirs=[data]).start()
    try:
        fill(broker.bootstrap)
        seen = observe(broker.bootstrap, broker.host, broker.port)
        open_transaction(broker.bootstrap)
    finally:
        close_clients()
        broker.close()
    copy = workdir / "migration-data"
    shutil.copytree(data, copy)
    meta = read_meta_properties(data) or {}
    return Source(seen, data, copy, meta["cluster.id"], int((data / "producer-id-block").read_text()), workdir)


def _sasl_listener(node: KafkaNode, port: int) -> dict[str, str]:
    """A SASL_PLAINTEXT listener with both SCRAM mechanisms beside the node's PLAINTEXT one."""
    login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {"listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{port},"
                         f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": login,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": login}


@pytest.fixture(scope="module")
def on_kafka(source: Source) -> Iterator[OnKafka]:
    left = source.workdir / "metadata-left-by-pybroker"
    shutil.copytree(source.data / "__cluster_metadata-0", left)
    node = KafkaNode(source.workdir / "kafka", dict(SECURITY), log_dirs=[source.data], format=False)
    sasl_port = free_port()
    node.overrides.update(_sasl_listener(node, sasl_port))
    node.start()
    try:
        seen = observe(node.bootstrap, "127.0.0.1", node.port)
        yield OnKafka(seen, node, left, f"127.0.0.1:{sasl_port}")
    finally:
        close_clients()
        node.stop()


def test_the_export_says_what_it_wrote(source: Source) -> None:
    output = _export("--log-dirs", str(source.copy), "--metadata-dir", str(source.workdir / "scratch-metadata"),
                     "--controller-id", str(CONTROLLER_ID))
    assert f"{len(PARTITIONS) + 3} topics" in output  # + OPEN and the two internal topics
    assert f"{len(ACLS)} acls" in output
    for count in ( "2 scram credentials", "2 client quotas", "2 broker configs"):
        assert count in output, output


def test_kafka_serves_the_same_topics_and_ids(source: Source, on_kafka: OnKafka) -> None:
    ids = dict(on_kafka.seen.topic_ids)
    assert ids.pop(OPEN, None) is not None
    assert set(source.seen.topic_ids) == set(PARTITIONS)
    assert ids == source.seen.topic_ids


def test_kafka_serves_the_same_records_at_the_same_offsets(source: Source, on_kafka: OnKafka) -> None:
    for key, records in source.seen.records.items():
        assert records, key
        assert on_kafka.seen.records[key] == records, key
    committed = [r[4] for r in on_kafka.seen.records["read_committed", "tk-txn"]]
    assert committed == [b"t1", b"t2", b"t3", b"t4"]


def test_committed_offsets_configs_acls_users_quotas(source: Source, on_kafka: OnKafka) -> None:
    assert source.seen.committed == COMMITTED
    assert on_kafka.seen.committed == COMMITTED
    assert on_kafka.seen.configs == source.seen.configs == TOPIC_CONFIGS
    assert source.seen.acls and on_kafka.seen.acls == source.seen.acls
    assert source.seen.scram and on_kafka.seen.scram == source.seen.scram
    assert on_kafka.seen.quotas == source.seen.quotas and "producer_byte_rate=1024.0" in " ".join(source.seen.quotas)
    # one GROUP resource with the share and the streams keys, and a CLIENT_METRICS subscription
    assert [line.split()[0] for line in source.seen.group_configs] == [
        "share.record.lock.duration.ms=45000", "streams.num.standby.replicas=1"]
    assert on_kafka.seen.group_configs == source.seen.group_configs
    assert "interval.ms=60000" in [line.split()[0] for line in source.seen.client_metrics]
    assert on_kafka.seen.client_metrics == source.seen.client_metrics


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_pybroker_user_logs_in_to_kafka_and_its_acls_hold(on_kafka: OnKafka, mechanism: str) -> None:
    """The password set on pybroker works on Kafka (the exported salted keys are the same), and the exported ACLs
    decide: the allowed topic is served, the other refused; a wrong password is refused."""
    settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": USER,
                "sasl.password": PASSWORD}
    values: list[bytes] = []
    with ck_consumer(on_kafka.sasl_bootstrap, **settings) as consumer:
        consumer.assign([TopicPartition(CONF, 0, 0)])
        deadline = time.monotonic() + 30
        while not values and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(num_messages=100, timeout=0.3) if m.error() is None]
    assert values, "the ACL-allowed topic gave nothing"
    # librdkafka's consumer shows no error for an assigned partition it may not read: ask Metadata instead
    admin = AdminClient({"bootstrap.servers": on_kafka.sasl_bootstrap, **settings})
    refused = admin.list_topics(topic="tk-txn", timeout=20).topics["tk-txn"].error
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    wrong = {**settings, "sasl.password": PASSWORD + "x"}
    admin = AdminClient({"bootstrap.servers": on_kafka.sasl_bootstrap, **wrong})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)


def test_dynamic_broker_configs(source: Source, on_kafka: OnKafka) -> None:
    for key, value in BROKER_CONFIGS.items():
        assert source.seen.broker_configs[key] == (value, "DYNAMIC_BROKER_CONFIG")
        assert on_kafka.seen.broker_configs[key] == (value, "DYNAMIC_BROKER_CONFIG")


def test_the_metadata_log_decodes_in_kafkas_dump_log(source: Source, on_kafka: OnKafka) -> None:
    files = sorted(p for p in on_kafka.left.iterdir() if p.suffix in (".checkpoint", ".log"))
    assert [p.suffix for p in files].count(".checkpoint") == 1 and any(p.suffix == ".log" for p in files)
    result = runner.run("kafka-dump-log", "", "--cluster-metadata-decoder", "--files", ",".join(map(str, files)))
    # DumpLogSegments counts offsets from -1 in each file, so a segment that starts after the snapshot (at its
    # end offset, as Kafka's own do) is reported as "-1 is followed by <base>": its only remark
    segments = [p for p in files if p.suffix == ".log" and p.stat().st_size]
    remarks = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    assert result.code == 0 and remarks == [
        line for p in segments for line in (f"Non-consecutive offsets in {p}", f"-1 is followed by {int(p.stem)}")
    ], result.stderr
    text = result.stdout
    assert "SnapshotHeader" in text and "SnapshotFooter" in text
    assert "isvalid: false" not in text and "Exception" not in text + result.stderr
    assert text.count('"type":"TOPIC_RECORD"') >= len(PARTITIONS) + 3
    assert f'"nextProducerId":{source.next_producer_id}' in text
    for kind in ("FEATURE_LEVEL_RECORD", "PARTITION_RECORD", "CONFIG_RECORD", "ACCESS_CONTROL_ENTRY_RECORD",
                 "USER_SCRAM_CREDENTIAL_RECORD", "CLIENT_QUOTA_RECORD", "PRODUCER_IDS_RECORD"):
        assert f'"type":"{kind}"' in text, kind


def test_the_open_transaction_stays_open_until_its_producer_returns(on_kafka: OnKafka) -> None:
    bootstrap = on_kafka.node.bootstrap
    assert [r[4] for r in read_all(bootstrap, OPEN, "read_uncommitted")] == [b"open1"]
    assert read_all(bootstrap, OPEN, "read_committed") == []
    producer = ck_producer(bootstrap, **{"transactional.id": OPEN})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(OPEN, value=b"after-open")
    producer.commit_transaction(60)
    close_clients()
    assert [r[4] for r in read_all(bootstrap, OPEN, "read_committed")] == [b"after-open"]


def test_kafka_accepts_new_records_after_the_old_ones(on_kafka: OnKafka) -> None:
    bootstrap = on_kafka.node.bootstrap
    producer = ck_producer(bootstrap, **{"enable.idempotence": True})
    producer.produce("tk-conf", value=b"on-kafka", partition=0)
    ck_flush(producer)
    close_clients()
    last = [r for r in read_all(bootstrap, "tk-conf", "read_uncommitted") if r[0] == 0][-1]
    assert last[4] == b"on-kafka" and last[1] == 10  # pybroker left offsets 0-9 in partition 0


# -- and back: pybroker on the dirs Kafka served since the export --------------------------------------------
MADE_ON_KAFKA = "tk-made-on-kafka"
MADE_BACK = "tk-made-back-on-pybroker"


@dataclass
class Back:
    ids_on_kafka: dict[str, uuid.UUID]
    ids: dict[str, uuid.UUID]
    made_on_kafka: list[bytes]
    conf_retention: str
    log: str
    #: the topics of the metadata log after pybroker created one on it
    in_the_log: set[str]


@pytest.fixture(scope="module")
def back(source: Source, on_kafka: OnKafka) -> Iterator[Back]:
    """Kafka creates a topic, deletes one and changes a config; then pybroker starts on the dirs again."""
    bootstrap = on_kafka.node.bootstrap
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(MADE_ON_KAFKA, num_partitions=1, replication_factor=1)])[MADE_ON_KAFKA].result(30)
    admin.delete_topics(["tk-compacted"])["tk-compacted"].result(30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, CONF, incremental_configs=[
        ConfigEntry("retention.ms", "999999", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    producer = ck_producer(bootstrap)
    for i in range(3):
        producer.produce(MADE_ON_KAFKA, value=b"k%d" % i)
    ck_flush(producer)
    close_clients()
    ids_on_kafka = topic_ids("127.0.0.1", on_kafka.node.port)
    on_kafka.node.stop()
    broker = BrokerProcess(source.workdir / "pybroker-again", dict(SECURITY), log_dirs=[source.data]).start()
    try:
        admin = ck_admin(broker.bootstrap)  # held: a collected admin client fails its futures
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, CONF)])
        retention = next(iter(described.values())).result(20)["retention.ms"].value
        made = [r[4] for r in read_all(broker.bootstrap, MADE_ON_KAFKA, "read_uncommitted")]
        ids = topic_ids(broker.host, broker.port)
        admin.create_topics([NewTopic(MADE_BACK, num_partitions=2, replication_factor=1)])[MADE_BACK].result(30)
        in_the_log = set(read_kraft_metadata(source.data).topics())
        yield Back(ids_on_kafka, ids, made, retention, broker.log_path.read_text(errors="replace"), in_the_log)
    finally:
        close_clients()
        broker.close()


def test_pybroker_takes_back_what_kafka_changed_after_the_export(back: Back) -> None:
    assert MADE_ON_KAFKA in back.ids_on_kafka and "tk-compacted" not in back.ids_on_kafka
    assert back.ids == back.ids_on_kafka
    assert back.made_on_kafka == [b"k0", b"k1", b"k2"]
    assert back.conf_retention == "999999"
    assert "took over Apache Kafka's metadata log" in back.log


def test_pybroker_goes_on_from_kafkas_metadata_log(source: Source, back: Back) -> None:
    assert '"went_on": true' in back.log
    assert (source.data / "__cluster_metadata-0" / "quorum-state").exists()  # Kafka's log, appended to
    assert {MADE_BACK, MADE_ON_KAFKA} <= back.in_the_log and "tk-compacted" not in back.in_the_log


# -- the way out of one machine -------------------------------------------------------------------------------
@dataclass
class Migrated:
    seen_on_2: Seen
    reassign_output: str


def _reassignment(bootstrap: str) -> dict[str, object]:
    metadata = ck_admin(bootstrap).list_topics(timeout=30)
    return {"version": 1, "partitions": [{"topic": name, "partition": p, "replicas": [1, 2]}
                                         for name, topic in sorted(metadata.topics.items())
                                         for p in sorted(topic.partitions)]}


def _served_by(bootstrap: str, host: str, port: int) -> Seen:
    """Records and committed offsets only: the broker configs of node 1 cannot be described once it is gone.
    The offsets are read with Kafka's own kafka-consumer-groups: librdkafka's admin client, bootstrapped at
    broker 2, kept asking the stopped broker 1 and timed out."""
    seen = Seen(topic_ids=topic_ids(host, port))
    for topic in PARTITIONS:
        for isolation in ("read_committed", "read_uncommitted"):
            seen.records[isolation, topic] = read_all(bootstrap, topic, isolation, timeout=60)
    deadline = time.monotonic() + 60
    while True:  # the group coordinator moved to broker 2 and loads its partition first
        described = runner.run("kafka-consumer-groups", bootstrap, "--bootstrap-server", "{bootstrap}", "--describe",
                               "--group", GROUP, "--offsets")
        rows = [line.split() for line in described.lines if line.startswith(GROUP)]
        seen.committed = {(row[1], int(row[2])): int(row[3]) for row in rows}
        if seen.committed == COMMITTED or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return seen


@pytest.fixture(scope="module")
def migrated(source: Source, on_kafka: OnKafka) -> Iterator[Migrated]:
    on_kafka.node.stop()  # three JVMs follow: free the combined node's memory first (the round trip stopped it)
    meta_dir = source.workdir / "controller-metadata"
    _export("--log-dirs", str(source.copy), "--metadata-dir", str(meta_dir), "--controller-id", str(CONTROLLER_ID))
    controller = KafkaNode(source.workdir / "controller", dict(SECURITY), node_id=CONTROLLER_ID, roles="controller",
                           log_dirs=[meta_dir], format=False)
    nodes = [controller]
    try:
        controller.start()
        first = KafkaNode(source.workdir / "broker-1", dict(SECURITY), node_id=1, roles="broker",
                          log_dirs=[source.copy], format=False, controller=controller)
        nodes.append(first)
        first.start()
        second = KafkaNode(source.workdir / "broker-2", dict(SECURITY), node_id=2, roles="broker",
                           controller=controller, cluster_id=source.cluster_id)
        nodes.append(second)
        second.start()
        plan = source.workdir / "reassignment.json"
        plan.write_text(json.dumps(_reassignment(first.bootstrap)))
        runner.run("kafka-reassign-partitions", first.bootstrap, "--bootstrap-server", "{bootstrap}",
                   "--reassignment-json-file", str(plan), "--execute").check()
        deadline = time.monotonic() + 180
        while True:
            verify = runner.run("kafka-reassign-partitions", first.bootstrap, "--bootstrap-server", "{bootstrap}",
                                "--reassignment-json-file", str(plan), "--verify")
            if verify.code == 0 and "is still in progress" not in verify.stdout:
                break
            assert time.monotonic() < deadline, verify.stdout + verify.stderr
            time.sleep(1)
        first.stop()
        yield Migrated(_served_by(second.bootstrap, "127.0.0.1", second.port), verify.stdout)
    finally:
        close_clients()
        for node in reversed(nodes):
            node.stop()


def test_after_the_reassignment_and_the_first_node_gone_the_second_serves_everything(
        source: Source, migrated: Migrated) -> None:
    assert "is completed" in migrated.reassign_output
    ids = dict(migrated.seen_on_2.topic_ids)
    assert ids.pop(OPEN, None) is not None
    assert ids == source.seen.topic_ids
    for key, records in source.seen.records.items():
        assert migrated.seen_on_2.records[key] == records, key
    assert migrated.seen_on_2.committed == COMMITTED
