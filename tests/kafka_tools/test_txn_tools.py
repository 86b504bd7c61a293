"""kafka-transactions against pybroker and Kafka: list, describe, describe-producers, find-hanging, abort.

A stock transactional producer (librdkafka) opens a transaction on each broker and is left open, so the
tool has an ongoing transaction to show; then the producer is closed without ending it and the tool
aborts it by its partition and start offset, which writes the ABORT marker (the end offset moves past it).
Times, durations and producer ids differ between the brokers: they are normalized away.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from confluent_kafka import Producer

from tests.kafka_tools.normalize import normalize
from tests.kafka_tools.runner import BOOTSTRAP as B
from tests.kafka_tools.runner import Targets

Names = Callable[[str], str]


def _open_transaction(bootstrap: str, topic: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=b"k", value=b"open %d" % i, partition=0)
    producer.flush(60)
    return producer


def _columns(text: str) -> str:
    """Tables with times, durations, producer ids and epochs replaced: only states and offsets remain."""
    text = normalize(text)
    text = re.sub(r"\b1\d{12}\b", "<time>", text)  # epoch milliseconds
    lines = []
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0].isdigit() and len(cells) >= 6 and "Ongoing" not in line:
            cells[0:2] = ["<pid>", "<epoch>"]  # describe-producers: ProducerId, ProducerEpoch first
        lines.append(" ".join(cells))
    return "\n".join(lines)


def test_kafka_transactions(targets: Targets, names: Names) -> None:
    topic, tid = names("t"), names("txn")
    targets.same("kafka-topics", "--bootstrap-server", B, "--create", "--topic", topic, "--partitions", "1")
    producers = [_open_transaction(bootstrap, topic, tid) for bootstrap in (targets.ours, targets.kafkas)]
    try:
        mine, theirs = targets.both("kafka-transactions", "--bootstrap-server", B, "list")
        for result in (mine, theirs):
            row = next(line.split() for line in result.check().lines if line.startswith(tid))
            assert row[-1] == "Ongoing", result.stdout
        mine, theirs = targets.both("kafka-transactions", "--bootstrap-server", B, "describe",
                                    "--transactional-id", tid)
        for result in (mine, theirs):
            header, row = (line.split() for line in result.check().lines[:2])
            fields = dict(zip(header, row, strict=True))
            assert (fields["TransactionState"], fields["TransactionTimeoutMs"], fields["TopicPartitions"]) == (
                "Ongoing", "600000", f"{topic}-0")
        mine, theirs = targets.both("kafka-transactions", "--bootstrap-server", B, "describe-producers",
                                    "--topic", topic, "--partition", "0")
        assert _columns(mine.check().stdout) == _columns(theirs.check().stdout)
        assert mine.lines[1].split()[-1] == "0", "the open transaction starts at offset 0"
        # the coordinator knows the transaction: nothing hangs, on either broker
        for args in (["--broker-id", "1"], ["--topic", topic, "--max-transaction-timeout", "0"]):
            targets.same("kafka-transactions", "--bootstrap-server", B, "find-hanging", *args)
    finally:
        producers.clear()  # dropped without ending the transaction: the tool aborts it below
    targets.same("kafka-transactions", "--bootstrap-server", B, "abort", "--topic", topic, "--partition", "0",
                 "--start-offset", "0")
    mine, theirs = targets.both("kafka-transactions", "--bootstrap-server", B, "describe-producers",
                                "--topic", topic, "--partition", "0")
    assert _columns(mine.check().stdout) == _columns(theirs.check().stdout)
    assert mine.lines[1].split()[-1] == "None", "no transaction open in the partition any more"
    targets.same("kafka-get-offsets", "--bootstrap-server", B, "--topic", topic)  # 3 records and the marker
    # a start offset with no transaction: refused by both
    mine, theirs = targets.both("kafka-transactions", "--bootstrap-server", B, "abort", "--topic", topic,
                                "--partition", "0", "--start-offset", "1")
    assert mine.code == theirs.code != 0
