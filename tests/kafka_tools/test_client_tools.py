"""Kafka's client tools against pybroker: console producer and consumer, the verifiable producer and
consumer (the system tests' clients), the two perf tests and the end-to-end latency tool.

Their output is records and rates, not a deterministic answer to compare with Kafka's: each test checks
what the tool reports about correctness (every record acked, read back, in order per partition,
committed) and leaves speed to `make bench`. The rates they print are logged for docs/kafka-tools.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from tests.kafka_tools.runner import BOOTSTRAP as B
from tests.kafka_tools.runner import Targets, run

Names = Callable[[str], str]


def _topic(targets: Targets, topic: str, partitions: int) -> None:
    run("kafka-topics", targets.ours, "--bootstrap-server", B, "--create", "--topic", topic, "--partitions",
        str(partitions)).check()


def test_console_producer_and_consumer(targets: Targets, names: Names) -> None:
    topic = names("t")
    _topic(targets, topic, 2)
    lines = "".join(f"key{i}\tvalue {i}\n" for i in range(50))
    run("kafka-console-producer", targets.ours, "--bootstrap-server", B, "--topic", topic, "--reader-property",
        "parse.key=true", "--reader-property", "key.separator=\t", "--producer-property", "acks=all",
        stdin=lines).check()
    read = run("kafka-console-consumer", targets.ours, "--bootstrap-server", B, "--topic", topic,
               "--from-beginning", "--max-messages", "50", "--formatter-property", "print.key=true",
               "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
               "--isolation-level", "read_committed").check()
    records = [re.match(r"Partition:(\d+)\tOffset:(\d+)\t(\S+)\t(.*)$", line) for line in read.lines[:50]]
    assert all(records), read.stdout
    assert sorted(m.group(3) for m in records if m) == sorted(f"key{i}" for i in range(50))
    by_partition: dict[str, list[int]] = {}
    for m in records:
        assert m is not None
        by_partition.setdefault(m.group(1), []).append(int(m.group(2)))
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets))), "offsets in order from 0 in each partition"


def test_verifiable_producer_and_consumer(targets: Targets, names: Names) -> None:
    topic, group = names("t"), names("g")
    _topic(targets, topic, 3)
    produced = run("kafka-verifiable-producer", targets.ours, "--bootstrap-server", B, "--topic", topic,
                   "--max-messages", "300", "--acks", "-1").check()
    events = [json.loads(line) for line in produced.lines if line.startswith("{")]
    summary = next(e for e in events if e["name"] == "tool_data")
    assert (summary["sent"], summary["acked"]) == (300, 300)
    assert sum(1 for e in events if e["name"] == "producer_send_success") == 300
    consumed = run("kafka-verifiable-consumer", targets.ours, "--bootstrap-server", B, "--topic", topic,
                   "--group-id", group, "--max-messages", "300", "--reset-policy", "earliest").check()
    events = [json.loads(line) for line in consumed.lines if line.startswith("{")]
    got = sum(e["count"] for e in events if e["name"] == "records_consumed")
    assert got == 300
    commits = [e for e in events if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits), commits
    committed = {(o["topic"], o["partition"]): o["offset"] for e in commits for o in e["offsets"]}
    assert sum(committed.values()) == 300, committed
    assert any(e["name"] == "partitions_assigned" for e in events)


def test_producer_and_consumer_perf_tests(targets: Targets, names: Names) -> None:
    topic = names("t")
    _topic(targets, topic, 2)
    produced = run("kafka-producer-perf-test", targets.ours, "--topic", topic, "--num-records", "20000",
                   "--record-size", "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={B}",
                   "acks=all").check()
    final = produced.lines[-1]
    assert final.startswith("20000 records sent"), produced.stdout
    print(f"kafka-producer-perf-test against pybroker: {final}")
    consumed = run("kafka-consumer-perf-test", targets.ours, "--bootstrap-server", B, "--topic", topic,
                   "--messages", "20000", "--timeout", "60000").check()
    header, values = consumed.lines[-2], consumed.lines[-1]
    fields = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=True))
    assert int(fields["data.consumed.in.nMsg"]) >= 20000, consumed.stdout
    print(f"kafka-consumer-perf-test against pybroker: {fields}")


def test_end_to_end_latency(targets: Targets, names: Names) -> None:
    topic = names("t")
    _topic(targets, topic, 1)
    done = run("kafka-e2e-latency", targets.ours, "--bootstrap-server", B, "--topic", topic, "--num-records",
               "200", "--producer-acks", "all", "--record-size", "100").check()
    assert any(line.startswith("Avg latency:") for line in done.lines), done.stdout
    assert any(line.startswith("Percentiles:") for line in done.lines), done.stdout
    print(f"kafka-e2e-latency against pybroker: {' / '.join(done.lines[-2:])}")
