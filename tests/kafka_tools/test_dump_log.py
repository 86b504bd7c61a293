"""Kafka reads pybroker's files: `kafka-dump-log` (DumpLogSegments) on a stopped pybroker's log dir.

The log dir holds what the format has: rolled segments with offset and time index entries (a small broker `log.segment.bytes`: Kafka's tools refuse a topic's under 1 MiB), a stock transactional
producer's committed and aborted transactions (so `.txnindex` entries and control batches), a compacted
topic after the cleaner ran, and the producer snapshots written at each roll and at the clean stop.
Kafka's tool must read every file with no error: each segment with `--deep-iteration`, each offset and
time index with `--verify-index-only` (every entry points at the batch it names) and
`--index-sanity-check`; and the batches it lists must be the ones `pybroker dump-log` lists, with
`pybroker check-log` finding no problem in the same dir.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from pybroker.broker.cli import cli
from tests.integration.brokers import BrokerProcess
from tests.kafka_tools.runner import run

SEGMENT_BYTES = "2048"
CLEAN_TIMEOUT = 90.0
#: what DumpLogSegments prints for a batch: the fields both tools must agree on
BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*isTransactional: (\w+) "
                   r"isControl: (\w+) ")


@pytest.fixture(scope="module")
def log_dir(kafka_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A stopped pybroker's log dir with transactions (one aborted), a cleaned compacted topic and rolls."""
    broker = BrokerProcess(tmp_path_factory.mktemp("dump-log-broker"), {
        "log.cleaner.backoff.ms": "100", "log.index.interval.bytes": "256", "log.segment.bytes": SEGMENT_BYTES,
        "auto.create.topics.enable": "false", "transaction.state.log.num.partitions": "1",
        "offsets.topic.num.partitions": "1"})
    broker.start()
    try:
        _create(broker, "txn", {})
        _create(broker, "compacted", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        _create(broker, "plain", {})
        _transactions(broker.bootstrap)
        _plain(broker.bootstrap)
        _compacted(broker.bootstrap)
        _wait_cleaned(broker.log_dirs[0], "compacted-0")
        broker.stop()
        yield broker.log_dirs[0]
    finally:
        broker.close()


def _create(broker: BrokerProcess, topic: str, configs: dict[str, str]) -> None:
    args = ["--bootstrap-server", broker.bootstrap, "--create", "--topic", topic, "--partitions", "1"]
    for key, value in configs.items():
        args += ["--config", f"{key}={value}"]
    run("kafka-topics", broker.bootstrap, *args).check()


def _transactions(bootstrap: str) -> None:
    """A stock transactional producer (librdkafka): commits, one abort in the middle, more commits, each
    transaction big enough that the segments roll within and between transactions."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dump-log-txn", "linger.ms": 5})
    producer.init_transactions(30)
    for round_ in range(6):
        producer.begin_transaction()
        for i in range(40):
            producer.produce("txn", key=f"k{i % 7}".encode(), value=f"round {round_} record {i}".encode() * 3)
        producer.flush(30)
        if round_ == 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def _plain(bootstrap: str) -> None:
    """Small batches, one a send, so segments hold many and the offset indexes have entries to verify."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(120):
        producer.produce("plain", key=f"p{i}".encode(), value=f"plain record {i}".encode())
        producer.flush(30)


def _compacted(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(400):
        value = None if i % 50 == 49 else f"value {i}".encode() * 4  # a few tombstones
        producer.produce("compacted", key=f"key{i % 12}".encode(), value=value)
        if i % 20 == 19:
            producer.flush(30)  # many small batches, many rolled segments for the cleaner
    producer.flush(30)


def _wait_cleaned(root: Path, partition: str) -> None:
    """The cleaner has cleaned the partition once it is in `cleaner-offset-checkpoint`."""
    deadline = time.monotonic() + CLEAN_TIMEOUT
    checkpoint = root / "cleaner-offset-checkpoint"
    name, index = partition.rsplit("-", 1)
    while time.monotonic() < deadline:
        if checkpoint.exists() and any(line.split()[:2] == [name, index]
                                       for line in checkpoint.read_text().splitlines()[2:]):
            return
        time.sleep(0.2)
    raise AssertionError(f"{partition} was not cleaned within {CLEAN_TIMEOUT:.0f} s")


def _files(root: Path, *suffixes: str) -> list[Path]:
    return sorted(p for partition in ("txn-0", "compacted-0", "plain-0") for p in (root / partition).iterdir()
                  if p.suffix in suffixes)


def _dump(root: Path, files: list[Path], *flags: str) -> str:
    """DumpLogSegments' stdout; its stderr may hold only its notes on offset gaps, checked here."""
    done = run("kafka-dump-log", "-", "--files", ",".join(str(f) for f in files), *flags)
    assert done.code == 0, done.stderr
    gaps = _gaps(done.errors())
    for path, pairs in gaps.items():
        segment_base = int(Path(path).stem)
        for before, after in pairs:
            # Kafka's tool notes "-1 is followed by <base>" for any segment not at offset 0, its own too
            if before == -1 and after == segment_base:
                continue
            # a cleaned segment has gaps where the cleaner removed records: that is what compaction is
            assert "compacted-0" in path, f"{path}: offset {before} is followed by {after}"
    return done.stdout


def _gaps(lines: list[str]) -> dict[str, list[tuple[int, int]]]:
    gaps: dict[str, list[tuple[int, int]]] = {}
    current = None
    for line in lines:
        if line.startswith("Non-consecutive offsets in "):
            current = gaps.setdefault(line.removeprefix("Non-consecutive offsets in ").strip(), [])
        elif current is not None and (pair := re.match(r"\s+(-?\d+) is followed by (\d+)$", line)):
            current.append((int(pair.group(1)), int(pair.group(2))))
        else:
            raise AssertionError(f"kafka-dump-log: {line}")
    return gaps


def test_the_log_dir_has_every_kind_of_file(log_dir: Path) -> None:
    txn = log_dir / "txn-0"
    assert len(list(txn.glob("*.log"))) > 2, "the transactional topic rolled"
    assert any(p.stat().st_size for p in txn.glob("*.txnindex")), "the abort is in a .txnindex"
    assert list(txn.glob("*.snapshot")), "producer snapshots"
    assert len(list((log_dir / "compacted-0").glob("*.log"))) > 1
    assert any(p.stat().st_size for p in (log_dir / "plain-0").glob("*.index")), "offset index entries"


def test_kafka_reads_every_segment_and_the_batches_are_ours(log_dir: Path) -> None:
    segments = _files(log_dir, ".log")
    out = _dump(log_dir, segments, "--deep-iteration")
    theirs: dict[str, list[tuple[int, ...]]] = {}
    current = ""
    for line in out.splitlines():
        if line.startswith("Dumping "):
            current = line.split(" ", 1)[1]
            theirs[current] = []
        elif (found := BATCH.match(line)) is not None:
            base, last, count, txn, control = found.groups()
            theirs[current].append((int(base), int(last), int(count), txn == "true", control == "true"))
        assert "isvalid: false" not in line, line
    assert not re.search(r"(?i)exception|corrupt|error", out), out
    records = sum(1 for line in out.splitlines() if line.startswith("| offset: "))
    for segment in segments:
        ours = [json.loads(line) for line in _pybroker("dump-log", "--json", str(segment)).splitlines()]
        listed = [(b["baseOffset"], b["lastOffset"], b["count"], b["isTransactional"], b["isControl"]) for b in ours]
        assert theirs[str(segment)] == listed, segment
    check = json.loads(_pybroker("check-log", "--json", str(log_dir)))
    assert check["problems"] == []
    assert sum(len(batches) for batches in theirs.values()) <= check["batches"]
    markers = [b for batches in theirs.values() for b in batches if b[4]]
    assert len(markers) == 6, "one marker per transaction"
    assert records > 0


def test_kafka_verifies_every_index(log_dir: Path) -> None:
    indexes = _files(log_dir, ".index", ".timeindex")
    out = _dump(log_dir, indexes, "--verify-index-only")
    assert "Mismatches" not in out and "not found" not in out and "not increasing" not in out, out
    out = _dump(log_dir, indexes, "--index-sanity-check")
    # an index of a segment shorter than index.interval.bytes has no entry: Kafka says "is empty"
    assert out.count("passed sanity check") + out.count(" is empty.") == len(indexes), out
    assert any(p.stat().st_size for p in indexes if p.suffix == ".index"), "some offset index has entries"


def test_kafka_reads_the_transaction_indexes_and_producer_snapshots(log_dir: Path) -> None:
    out = _dump(log_dir, _files(log_dir, ".txnindex", ".snapshot"))
    aborts = re.findall(r"version: 0 producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)",
                        out)
    assert len(aborts) == 1, out
    assert re.search(r"producerId: \d+ producerEpoch: \d+ coordinatorEpoch: \d+ currentTxnFirstOffset: ", out), out
    assert not re.search(r"(?i)exception|corrupt|error", out), out


def _pybroker(*args: str) -> str:
    """The `pybroker` command in process (one Python start per segment would cost more than Kafka's tool)."""
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 0, done.output
    return done.stdout
