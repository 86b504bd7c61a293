"""Kafka's admin tools against pybroker, each compared with the same tool's output against Kafka.

Every command runs against both brokers at once (`Targets.same`), and their outputs must be equal once
`normalize` took out ports, ids and log dir paths. Where a tool's answer cannot be the same on one
pybroker node, the test says why and asserts what pybroker answers instead (docs/kafka-tools.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from tests.kafka_tools.normalize import normalize, without_synonyms
from tests.kafka_tools.runner import BOOTSTRAP as B
from tests.kafka_tools.runner import Targets

Names = Callable[[str], str]


def _produce(targets: Targets, topic: str, count: int) -> None:
    """`count` keyed records through kafka-console-producer, on both brokers."""
    lines = "".join(f"k{i}:v{i}\n" for i in range(count))
    targets.same("kafka-console-producer", "--bootstrap-server", B, "--topic", topic, "--reader-property",
                 "parse.key=true", "--reader-property", "key.separator=:", stdin=lines)


def _create(targets: Targets, topic: str, partitions: int, *configs: str) -> None:
    extra = [arg for config in configs for arg in ("--config", config)]
    targets.same("kafka-topics", "--bootstrap-server", B, "--create", "--topic", topic,
                 "--partitions", str(partitions), *extra, normalize=normalize)


def test_kafka_topics_create_list_describe_alter_delete(targets: Targets, names: Names) -> None:
    topic = names("t")
    _create(targets, topic, 3, "cleanup.policy=compact", "retention.ms=1000")
    mine, _ = targets.same("kafka-topics", "--bootstrap-server", B, "--describe", "--topic", topic,
                           normalize=normalize)
    assert "PartitionCount: 3" in mine.stdout and "Configs: cleanup.policy=compact,retention.ms=1000" in mine.stdout
    mine, _ = targets.both("kafka-topics", "--bootstrap-server", B, "--list")
    assert topic in mine.lines
    targets.same("kafka-topics", "--bootstrap-server", B, "--alter", "--topic", topic, "--partitions", "5")
    mine, _ = targets.same("kafka-topics", "--bootstrap-server", B, "--describe", "--topic", topic,
                           normalize=normalize)
    assert "PartitionCount: 5" in mine.stdout
    # fewer or as many partitions: refused by both, with the controller's text
    for count in ("2", "5"):
        mine, theirs = targets.both("kafka-topics", "--bootstrap-server", B, "--alter", "--topic", topic,
                                    "--partitions", count)
        assert mine.code == theirs.code != 0
        assert mine.stdout == theirs.stdout and "would not be an increase" in mine.stdout + "would not be an increase"
    targets.same("kafka-topics", "--bootstrap-server", B, "--delete", "--topic", topic)
    mine, theirs = targets.both("kafka-topics", "--bootstrap-server", B, "--describe", "--topic", topic)
    assert mine.code == theirs.code != 0
    assert "does not exist" in mine.stdout + mine.stderr and "does not exist" in theirs.stdout + theirs.stderr


def test_kafka_configs_topics_and_brokers(targets: Targets, names: Names) -> None:
    topic = names("c")
    _create(targets, topic, 1)
    base = ["--bootstrap-server", B, "--entity-type", "topics", "--entity-name", topic]
    targets.same("kafka-configs", *base, "--alter", "--add-config", "retention.ms=1000,cleanup.policy=compact")
    targets.same("kafka-configs", *base, "--describe", normalize=without_synonyms)
    targets.same("kafka-configs", *base, "--alter", "--delete-config", "retention.ms")
    mine, _ = targets.same("kafka-configs", *base, "--describe", normalize=without_synonyms)
    assert "retention.ms" not in mine.stdout and "cleanup.policy=compact" in mine.stdout
    # an unknown key is refused by both
    mine, theirs = targets.both("kafka-configs", *base, "--alter", "--add-config", "no.such.key=1")
    assert mine.code != 0 and theirs.code != 0

    broker = ["--bootstrap-server", B, "--entity-type", "brokers", "--entity-name", "1"]
    targets.same("kafka-configs", *broker, "--alter", "--add-config", "log.cleaner.threads=2")
    mine, _ = targets.same("kafka-configs", *broker, "--describe", normalize=normalize)
    assert "log.cleaner.threads=2" in mine.stdout
    targets.same("kafka-configs", *broker, "--alter", "--delete-config", "log.cleaner.threads")
    default = ["--bootstrap-server", B, "--entity-type", "brokers", "--entity-default"]
    targets.same("kafka-configs", *default, "--alter", "--add-config", "log.retention.ms=86400000")
    targets.same("kafka-configs", *default, "--describe", normalize=normalize)
    targets.same("kafka-configs", *default, "--alter", "--delete-config", "log.retention.ms")


def test_kafka_configs_broker_loggers(targets: Targets) -> None:
    """Each broker names its own loggers (pybroker's are Python's), so only the shape is compared; an
    unknown logger is refused by both with the same message."""
    base = ["--bootstrap-server", B, "--entity-type", "broker-loggers", "--entity-name", "1"]
    mine, theirs = targets.both("kafka-configs", *base, "--describe")
    mine.check()
    theirs.check()
    assert mine.lines[0] == theirs.lines[0] == "Dynamic configs for broker-logger 1 are:"
    assert any(line.strip().startswith("pybroker=") for line in mine.lines)
    logger = next(line.split("=")[0].strip() for line in mine.lines[1:])
    ours = ["--bootstrap-server", B, "--entity-type", "broker-loggers", "--entity-name", "1"]
    from tests.kafka_tools.runner import run  # one broker only: the logger name is pybroker's
    run("kafka-configs", targets.ours, *ours, "--alter", "--add-config", f"{logger}=DEBUG").check()
    assert f"{logger}=DEBUG" in run("kafka-configs", targets.ours, *ours, "--describe").check().stdout
    run("kafka-configs", targets.ours, *ours, "--alter", "--delete-config", logger).check()
    mine, theirs = targets.both("kafka-configs", *base, "--alter", "--add-config", "no.such.logger=DEBUG")
    assert "Invalid broker logger(s): no.such.logger" in mine.stdout + mine.stderr
    assert "Invalid broker logger(s): no.such.logger" in theirs.stdout + theirs.stderr


def test_kafka_configs_quotas_and_scram(targets: Targets, names: Names) -> None:
    user, client = names("user"), names("client")
    u = ["--bootstrap-server", B, "--entity-type", "users", "--entity-name", user]
    c = ["--bootstrap-server", B, "--entity-type", "clients", "--entity-name", client]
    ip = ["--bootstrap-server", B, "--entity-type", "ips", "--entity-name", "127.0.0.9"]
    targets.same("kafka-configs", *u, "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    targets.same("kafka-configs", *u, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw-1]")
    mine, _ = targets.same("kafka-configs", *u, "--describe")
    assert "producer_byte_rate=1024.0" in mine.stdout and "SCRAM-SHA-256=iterations=8192" in mine.stdout
    assert "pw-1" not in mine.stdout
    targets.same("kafka-configs", *c, "--alter", "--add-config", "request_percentage=50")
    targets.same("kafka-configs", *c, "--describe")
    targets.same("kafka-configs", *u, "--entity-type", "clients", "--entity-name", client, "--alter",
                 "--add-config", "producer_byte_rate=10")
    targets.same("kafka-configs", *u, "--entity-type", "clients", "--entity-name", client, "--describe")
    targets.same("kafka-configs", *ip, "--alter", "--add-config", "connection_creation_rate=10")
    mine, _ = targets.same("kafka-configs", *ip, "--describe")
    assert "connection_creation_rate=10.0" in mine.stdout
    # (the tool alters quotas and SCRAM credentials in separate commands)
    for entity, keys in ((u, "producer_byte_rate,consumer_byte_rate"), (u, "SCRAM-SHA-256"), (c, "request_percentage"),
                         (ip, "connection_creation_rate")):
        targets.same("kafka-configs", *entity, "--alter", "--delete-config", keys)


def test_kafka_consumer_groups(targets: Targets, names: Names) -> None:
    topic, group = names("t"), names("g")
    _create(targets, topic, 2)
    _produce(targets, topic, 10)
    # a console consumer joins the group, reads everything, commits and leaves
    mine, theirs = targets.both("kafka-console-consumer", "--bootstrap-server", B, "--topic", topic, "--group",
                                group, "--from-beginning", "--max-messages", "10")
    assert sorted(mine.lines) == sorted(theirs.lines) and len(mine.lines) == 10
    mine, _ = targets.both("kafka-consumer-groups", "--bootstrap-server", B, "--list")
    assert group in mine.lines
    g = ["--bootstrap-server", B, "--group", group]
    targets.same("kafka-consumer-groups", *g, "--describe", normalize=normalize)
    mine, _ = targets.same("kafka-consumer-groups", *g, "--describe", "--state", normalize=normalize)
    assert "Empty" in mine.stdout
    targets.same("kafka-consumer-groups", *g, "--describe", "--members", "--verbose")
    targets.same("kafka-consumer-groups", *g, "--reset-offsets", "--topic", topic, "--to-earliest", "--execute")
    targets.same("kafka-consumer-groups", *g, "--reset-offsets", "--topic", f"{topic}:0", "--to-offset", "2",
                 "--execute")
    targets.same("kafka-consumer-groups", *g, "--reset-offsets", "--topic", topic, "--shift-by", "1", "--dry-run")
    targets.same("kafka-consumer-groups", *g, "--delete-offsets", "--topic", f"{topic}:1")
    targets.same("kafka-consumer-groups", *g, "--describe", "--offsets", normalize=normalize)
    targets.same("kafka-consumer-groups", *g, "--delete")
    mine, theirs = targets.both("kafka-consumer-groups", "--bootstrap-server", B, "--list")
    assert group not in mine.lines and group not in theirs.lines


def test_kafka_consumer_groups_describe_a_live_group(targets: Targets, names: Names) -> None:
    """A running console consumer is a member: state Stable, one member owning both partitions."""
    from tests.kafka_tools.live import live_consumers  # a helper that keeps one consumer per broker

    topic, group = names("t"), names("g")
    _create(targets, topic, 2)
    with live_consumers(targets, topic, group):
        g = ["--bootstrap-server", B, "--group", group]
        mine, _ = targets.same("kafka-consumer-groups", *g, "--describe", "--state", normalize=_live)
        assert "Stable" in mine.stdout and re.search(r"\s1\s*$", mine.lines[-1])
        mine, _ = targets.same("kafka-consumer-groups", *g, "--describe", "--members", normalize=_live)
        assert re.search(r"\s2\s*$", mine.lines[-1]), mine.stdout  # #PARTITIONS
        mine, theirs = targets.both("kafka-consumer-groups", *g, "--delete")
        assert "GroupNotEmptyException: The group is not empty." in mine.stdout
        assert _live(mine.stdout) == _live(theirs.stdout)


def _live(text: str) -> str:
    """A live group's member ids and client ids are random; its coordinator's address is the broker's."""
    text = re.sub(r"console-consumer-[0-9a-f-]+", "<member>", normalize(text))
    text = re.sub(r"/127\.0\.0\.1", "<host>", text)
    return re.sub(r"[ \t]+", " ", text)


def test_kafka_acls_add_list_remove(targets: Targets, names: Names) -> None:
    topic = names("acl")
    add = ["--bootstrap-server", B, "--add", "--allow-principal", "User:alice", "--operation", "Read",
           "--operation", "Write", "--topic", topic]
    mine, _ = targets.same("kafka-acls", *add, normalize=_acls)
    assert "User:alice" in mine.stdout
    targets.same("kafka-acls", "--bootstrap-server", B, "--add", "--deny-principal", "User:bob",
                 "--operation", "All", "--group", topic, "--resource-pattern-type", "prefixed", normalize=_acls)
    targets.same("kafka-acls", "--bootstrap-server", B, "--list", "--topic", topic, normalize=_acls)
    targets.same("kafka-acls", "--bootstrap-server", B, "--list", "--principal", "User:bob", normalize=_acls)
    targets.same("kafka-acls", "--bootstrap-server", B, "--add", "--allow-principal", "User:carol", "--producer",
                 "--topic", topic, "--transactional-id", topic, "--idempotent", normalize=_acls)
    targets.same("kafka-acls", "--bootstrap-server", B, "--remove", "--force", "--topic", topic, normalize=_acls)
    targets.same("kafka-acls", "--bootstrap-server", B, "--remove", "--force", "--group", topic,
                 "--resource-pattern-type", "prefixed", normalize=_acls)
    targets.same("kafka-acls", "--bootstrap-server", B, "--remove", "--force", "--transactional-id", topic,
                 normalize=_acls)
    mine, _ = targets.same("kafka-acls", "--bootstrap-server", B, "--list", "--topic", topic, normalize=_acls)
    assert "alice" not in mine.stdout


def _acls(text: str) -> str:
    """ACL listings come in hash order, which differs between a JVM's sets and ours: compare sorted lines."""
    return "\n".join(sorted(line.strip() for line in normalize(text).splitlines() if line.strip()))


def test_kafka_get_offsets_and_delete_records(targets: Targets, names: Names, tmp_path: Path) -> None:
    topic = names("o")
    _create(targets, topic, 2)
    _produce(targets, topic, 10)
    targets.same("kafka-get-offsets", "--bootstrap-server", B, "--topic", topic)
    targets.same("kafka-get-offsets", "--bootstrap-server", B, "--topic", topic, "--time", "-2")
    mine, _ = targets.same("kafka-get-offsets", "--bootstrap-server", B, "--topic-partitions", f"{topic}:0-1",
                           "--time", "-1")
    full = next(line for line in mine.lines if int(line.rsplit(":", 1)[1]) > 0)
    partition = int(full.split(":")[-2])
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": partition,
                                                             "offset": 3}]}))
    mine, _ = targets.same("kafka-delete-records", "--bootstrap-server", B, "--offset-json-file", str(spec))
    assert "low_watermark: 3" in mine.stdout
    mine, _ = targets.same("kafka-get-offsets", "--bootstrap-server", B, "--topic", topic, "--time", "-2")
    assert f"{topic}:{partition}:3" in mine.lines
    # past the end: both refuse with OFFSET_OUT_OF_RANGE
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": partition,
                                                             "offset": 99}]}))
    mine, theirs = targets.both("kafka-delete-records", "--bootstrap-server", B, "--offset-json-file", str(spec))
    assert "OffsetOutOfRangeException" in mine.stdout + mine.stderr
    assert "OffsetOutOfRangeException" in theirs.stdout + theirs.stderr


def test_kafka_log_dirs(targets: Targets, names: Names) -> None:
    topic = names("d")
    _create(targets, topic, 2)
    _produce(targets, topic, 5)
    mine, _ = targets.same("kafka-log-dirs", "--bootstrap-server", B, "--describe", "--topic-list", topic,
                           normalize=normalize)
    described = json.loads(mine.lines[-1])
    sizes = [p["size"] for p in described["brokers"][0]["logDirs"][0]["partitions"]]
    assert sorted(sizes)[-1] > 0


def test_kafka_leader_election_on_one_replica(targets: Targets, names: Names) -> None:
    """One replica per partition: the preferred leader is already the leader, and an unclean election has
    no other replica to pick. Kafka's own answers on one node are the reference."""
    topic = names("e")
    _create(targets, topic, 1)
    mine, theirs = targets.both("kafka-leader-election", "--bootstrap-server", B, "--election-type", "preferred",
                                "--topic", topic, "--partition", "0")
    assert (mine.code, mine.stdout) == (theirs.code, theirs.stdout)
    assert f"Valid replica already elected for partitions {topic}-0" in mine.stdout
    mine, theirs = targets.both("kafka-leader-election", "--bootstrap-server", B, "--election-type", "unclean",
                                "--topic", topic, "--partition", "0")
    assert (mine.code, mine.stdout) == (theirs.code, theirs.stdout)
    mine, theirs = targets.both("kafka-leader-election", "--bootstrap-server", B, "--election-type", "preferred",
                                "--all-topic-partitions")
    assert mine.code == theirs.code == 0


def test_kafka_reassign_partitions(targets: Targets, names: Names, tmp_path: Path) -> None:
    """One broker: a reassignment to the same broker completes at once; --verify then clears the
    replication throttles the tool may have set (keys pybroker accepts for it)."""
    topic = names("r")
    _create(targets, topic, 2)
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    targets.same("kafka-reassign-partitions", "--bootstrap-server", B, "--generate", "--topics-to-move-json-file",
                 str(move), "--broker-list", "1", normalize=normalize)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1],
                                                             "log_dirs": ["any"]}]}))
    targets.same("kafka-reassign-partitions", "--bootstrap-server", B, "--execute", "--throttle", "1000000",
                 "--reassignment-json-file", str(plan), normalize=normalize)
    mine, _ = targets.same("kafka-reassign-partitions", "--bootstrap-server", B, "--verify",
                           "--reassignment-json-file", str(plan), normalize=normalize)
    assert f"Reassignment of partition {topic}-0 is completed." in mine.stdout
    targets.same("kafka-reassign-partitions", "--bootstrap-server", B, "--list")


def test_kafka_features_and_metadata_quorum(targets: Targets) -> None:
    """pybroker is its own one-voter quorum and finalizes only the features it implements, so these are
    compared by shape: the same features must be finalized at a level the tool accepts."""
    mine, theirs = targets.both("kafka-features", "--bootstrap-server", B, "describe")
    mine.check()
    theirs.check()
    ours = {line.split()[1] for line in mine.lines}
    assert {"metadata.version", "transaction.version"} <= ours <= {line.split()[1] for line in theirs.lines}
    mine, theirs = targets.both("kafka-metadata-quorum", "--bootstrap-server", B, "describe", "--status")
    mine.check()
    theirs.check()
    keys = [line.split(":")[0] for line in mine.lines]
    assert keys == [line.split(":")[0] for line in theirs.lines]
    assert "LeaderId:               1" in mine.lines
    mine, theirs = targets.both("kafka-metadata-quorum", "--bootstrap-server", B, "describe", "--replication")
    mine.check()
    assert mine.lines[0] == theirs.lines[0] and mine.lines[1].split()[-1] == "Leader"


def test_kafka_client_metrics(targets: Targets, names: Names) -> None:
    name = names("m")
    base = ["--bootstrap-server", B]
    targets.same("kafka-client-metrics", *base, "--alter", "--name", name, "--metrics",
                 "org.apache.kafka.producer.", "--interval", "10000", "--match", "client_id=app.*")
    targets.same("kafka-client-metrics", *base, "--describe", "--name", name)
    mine, _ = targets.both("kafka-client-metrics", *base, "--list")
    assert name in mine.lines
    targets.same("kafka-client-metrics", *base, "--delete", "--name", name)
    mine, _ = targets.both("kafka-client-metrics", *base, "--list")
    assert name not in mine.lines
