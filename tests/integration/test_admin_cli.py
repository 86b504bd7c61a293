"""The admin command line against a live broker (topics, groups) and on real segment files (dump-log,
check-log, including a corrupted segment that check-log reports by file and position).

The `groups` tests need the group coordinator; they skip, saying so, while the broker does not
advertise JoinGroup (api key 11) in ApiVersions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pybroker.broker.cli import cli
from pybroker.clients.wire import WireClient
from tests.integration.brokers import REPO_ROOT, BrokerProcess, free_port
from tests.integration.clients import kp_consumer, kp_producer

JOIN_GROUP = 11


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def pybroker(*args: str) -> Outcome:
    """The command line, in-process (click's runner: a subprocess per command would cost seconds each)."""
    result = CliRunner().invoke(cli, list(args), env={"PYBROKER_BOOTSTRAP_SERVER": None})
    return Outcome(result.exit_code, result.stdout, result.stderr)


def pybroker_process(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The installed program's own entry point (`main`: exit statuses, one-line usage errors)."""
    return subprocess.run([sys.executable, "-m", "pybroker.broker.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT, check=False, input=stdin)


def wire(broker: BrokerProcess, *args: str) -> Any:
    """Run a wire command with --json and return the parsed output (the command must succeed)."""
    result = pybroker(*args, "--bootstrap-server", broker.bootstrap, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def pybroker_only(broker_target: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own command line")


def test_topics_create_list_describe_alter_delete(pybroker_only: None, broker: BrokerProcess,
                                                  new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    created = wire(broker, "topics", "create", topic, "--partitions", "3", "--config", "retention.ms=86400000")
    assert created[0]["topic"] == topic and created[0]["partitions"] == 3
    assert topic in {row["topic"] for row in wire(broker, "topics", "list")}
    with kp_producer(broker.bootstrap) as producer:
        for i in range(5):
            producer.send(topic, b"%d" % i, partition=1)
        producer.flush(timeout=10)
    described = wire(broker, "topics", "describe", topic)
    assert [(r["partition"], r["log_start_offset"], r["log_end_offset"]) for r in described] == [
        (0, 0, 0), (1, 0, 5), (2, 0, 0)]
    assert described[0]["configs"] == {"retention.ms": "86400000"}
    altered = wire(broker, "topics", "alter-config", topic, "--set", "segment.bytes=1048576",
                   "--delete", "retention.ms")
    assert altered == [{"config": "segment.bytes", "value": "1048576"}]
    table = pybroker("topics", "describe", topic, "--bootstrap-server", broker.bootstrap)
    assert table.returncode == 0 and "LOG-END-OFFSET" in table.stdout and "segment.bytes=1048576" in table.stdout
    bad = pybroker("topics", "alter-config", topic, "--set", "segment.bytes=huge", "--bootstrap-server",
                   broker.bootstrap)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr and "segment.bytes" in bad.stderr
    assert wire(broker, "topics", "delete", topic) == [{"topic": topic, "deleted": True}]
    assert topic not in {row["topic"] for row in wire(broker, "topics", "list")}
    again = pybroker("topics", "delete", topic, "--bootstrap-server", broker.bootstrap)
    assert again.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in again.stderr


def test_unreachable_broker_is_one_clear_line(pybroker_only: None) -> None:
    for args in (["topics", "list"], ["groups", "list"]):
        result = pybroker_process(*args, "--bootstrap-server", f"127.0.0.1:{free_port()}")
        assert result.returncode == 1
        assert result.stderr.startswith("pybroker: error: cannot reach the broker at 127.0.0.1:")
        assert "Traceback" not in result.stderr
    bad = pybroker("topics", "list", "--bootstrap-server", "nonsense")
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr  # a command line that does not parse (docs/cli.md)


def _stopped_broker_with_data(broker_factory: Callable[..., BrokerProcess], topic: str) -> Path:
    broker = broker_factory({"log.segment.bytes": "4096", "log.index.interval.bytes": "100"})
    with kp_producer(broker.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(60):
            producer.send(topic, key=b"k%d" % i, value=b"value-%03d" % i, partition=0).get(timeout=10)
    broker.stop()
    return broker.log_dirs[0] / f"{topic}-0"


def test_dump_log_and_check_log_on_real_segments_and_a_corrupted_one(
        pybroker_only: None, broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    partition = _stopped_broker_with_data(broker_factory, topic)
    segments = sorted(partition.glob("*.log"))
    assert len(segments) > 1  # small segments: several files, indexes with entries
    dumped = pybroker("dump-log", str(segments[0]), "--print-records")
    assert dumped.returncode == 0, dumped.stderr
    assert "baseOffset: 0" in dumped.stdout and "crcValid: true" in dumped.stdout
    assert "| offset: 0 " in dumped.stdout and "payload: value-000" in dumped.stdout and "key: k0" in dumped.stdout
    batches = [json.loads(line) for line in pybroker("dump-log", str(segments[0]), "--json").stdout.splitlines()]
    assert batches[0]["baseOffset"] == 0 and all(b["crcValid"] for b in batches)
    index = pybroker("dump-log", str(segments[0].with_suffix(".index")))
    assert index.returncode == 0 and "position:" in index.stdout

    clean = pybroker("check-log", str(partition.parent), "--json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    report = json.loads(clean.stdout)
    # the log dir also holds the live KRaft metadata log, which check-log verifies like any log
    metadata = json.loads(pybroker("check-log", str(partition.parent / "__cluster_metadata-0"), "--json").stdout)
    assert metadata["problems"] == [] and metadata["segments"] >= 1
    assert report["problems"] == [] and report["batches"] == 60 + metadata["batches"]
    assert report["segments"] == len(segments) + metadata["segments"]

    victim = segments[1]
    victim_batches = [json.loads(line) for line in pybroker("dump-log", str(victim), "--json").stdout.splitlines()]
    second_batch = victim_batches[1]["position"]
    data = bytearray(victim.read_bytes())
    target = second_batch + 70  # inside the second batch's records, covered by its CRC
    data[target] ^= 0xFF
    victim.write_bytes(bytes(data))
    broken = pybroker("check-log", str(partition.parent))
    assert broken.returncode == 1
    assert str(victim) in broken.stdout and "CRC mismatch" in broken.stdout
    report = json.loads(pybroker("check-log", str(partition.parent), "--json").stdout)
    assert [(p["file"], p["position"]) for p in report["problems"]] == [(str(victim), second_batch)]
    bad_dump = pybroker("dump-log", str(victim))
    assert bad_dump.returncode == 0 and "crcValid: false" in bad_dump.stdout


def test_dump_log_refuses_files_that_are_not_segments(pybroker_only: None, tmp_path: Path) -> None:
    stray = tmp_path / "notes.txt"
    stray.write_text("hello")
    result = pybroker("dump-log", str(stray))
    assert result.returncode == 1 and "not a segment file" in result.stderr


# -- groups: need the coordinator ------------------------------------------------------------------
def _has_coordinator(bootstrap: str) -> bool:
    with WireClient(bootstrap) as client:
        return client.serves(JOIN_GROUP)


@pytest.fixture
def group_broker(pybroker_only: None, broker: BrokerProcess) -> BrokerProcess:
    if not _has_coordinator(broker.bootstrap):
        pytest.skip("the broker does not advertise JoinGroup (api key 11): no group coordinator on this branch yet")
    return broker


def test_groups_list_describe_and_reset_offsets(group_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic, group = new_topic(), new_topic("group")
    with kp_producer(group_broker.bootstrap) as producer:
        for i in range(10):
            producer.send(topic, b"%d" % i, partition=0)
        producer.flush(timeout=10)
    with kp_consumer(group_broker.bootstrap, group_id=group, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        seen = 0
        for _ in range(50):
            seen += sum(len(batch) for batch in consumer.poll(timeout_ms=200, max_records=4).values())
            if seen >= 4:
                break
        consumer.commit()
        active = wire(group_broker, "groups", "describe", group)
        assert active["state"] == "Stable" and len(active["members"]) == 1
        refused = pybroker("groups", "reset-offsets", group, "--to-earliest", "--execute",
                           "--bootstrap-server", group_broker.bootstrap)
        assert refused.returncode == 1 and "Stable" in refused.stderr
    assert group in {row["group"] for row in wire(group_broker, "groups", "list")}
    described = wire(group_broker, "groups", "describe", group)
    row = next(r for r in described["offsets"] if r["topic"] == topic)
    assert row["log_end_offset"] == 10 and row["lag"] == 10 - row["current_offset"]
    plan = wire(group_broker, "groups", "reset-offsets", group, "--to-earliest")
    assert [r["new_offset"] for r in plan] == [0]
    assert next(r for r in wire(group_broker, "groups", "describe", group)["offsets"])["current_offset"] != 0
    wire(group_broker, "groups", "reset-offsets", group, "--to-offset", "3", "--execute")
    assert next(r for r in wire(group_broker, "groups", "describe", group)["offsets"])["current_offset"] == 3
    wire(group_broker, "groups", "reset-offsets", group, "--to-latest", "--execute")
    assert next(r for r in wire(group_broker, "groups", "describe", group)["offsets"])["lag"] == 0
    wire(group_broker, "groups", "reset-offsets", group, "--to-datetime", "2000-01-01T00:00:00", "--execute")
    assert next(r for r in wire(group_broker, "groups", "describe", group)["offsets"])["current_offset"] == 0
