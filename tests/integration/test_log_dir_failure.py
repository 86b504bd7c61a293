"""A failing disk takes only its own log dir offline: real size-limited and read-only tmpfs mounts.

One dir lives on a small tmpfs. Filling it (ENOSPC), or making it read-only (EROFS), takes that dir
offline: its partitions answer KAFKA_STORAGE_ERROR and DescribeLogDirs reports it, while partitions on
the healthy dir keep taking writes that survive. When the only dir fails, the broker exits non-zero.

The kernel refuses `mount -o remount,ro` while the broker holds files open for writing (EBUSY), so the
read-only case puts a read-only tmpfs on the same path (the old mount detached lazily): every file the
broker creates or replaces there from then on (a checkpoint, a new segment) fails with EROFS, as on a
disk that went read-only. Mounting needs root (CAP_SYS_ADMIN); elsewhere these tests skip and say why.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaError
from kafka.admin import NewTopic

from pybroker.broker.cli import cli
from pybroker.clients.wire import WireClient
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_producer, kp_admin, kp_read

PARTITIONS = 4
KAFKA_STORAGE_ERROR = 56


def _mount(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or 'mount failed'}): needs root")


def _make_read_only(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)], check=True)


def _raw_codes(proc: BrokerProcess, topic: str, partition: int) -> tuple[int, int]:
    """(produce error, fetch error) for one partition, straight from the broker's answers: a client
    would first look at Metadata, which shows the partition without a leader once its dir is offline."""
    batch = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=int(time.time() * 1000))
    with WireClient(proc.bootstrap) as client:
        produced = client.call(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])]))
        fetched = client.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
            FetchTopic(topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=0,
                                                               partition_max_bytes=1 << 20)])]), 12)
    return (produced.responses[0].partition_responses[0].error_code, fetched.responses[0].partitions[0].error_code)


def _until_offline(proc: BrokerProcess, failing: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _log_dir_errors(proc).get(str(failing.absolute())) == KAFKA_STORAGE_ERROR:
            return
        time.sleep(0.2)
    raise AssertionError(f"{failing} never went offline")


def _umount(path: Path) -> None:
    for _ in range(20):
        if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.2)
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "small"
    _mount(mount_point, "2m")
    try:
        yield mount_point
    finally:
        _umount(mount_point)


def _two_dir_broker(broker_factory: Callable[..., BrokerProcess], healthy: Path, failing: Path,
                    topic: str) -> tuple[BrokerProcess, dict[int, Path]]:
    proc = broker_factory({"log.flush.offset.checkpoint.interval.ms": "500"}, log_dirs=[healthy, failing])
    with kp_admin(proc.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    placement = {p: (healthy if (healthy / f"{topic}-{p}").exists() else failing) for p in range(PARTITIONS)}
    assert set(placement.values()) == {healthy, failing}, "new partitions go to the dir with fewest"
    return proc, placement


def _produce(proc: BrokerProcess, topic: str, partition: int, count: int, size: int) -> list[KafkaError | None]:
    reports: list[KafkaError | None] = []
    producer = ck_producer(proc.bootstrap, **{"message.send.max.retries": 0, "acks": "all",
                                              "linger.ms": 0, "message.timeout.ms": 10_000})
    for i in range(count):
        producer.produce(topic, b"x" * size, key=b"%d" % i, partition=partition,
                         on_delivery=lambda err, msg: reports.append(err))
        producer.poll(0)
    producer.flush(20)
    return reports


def _log_dir_errors(proc: BrokerProcess) -> dict[str, int]:
    with kp_admin(proc.bootstrap) as admin:
        described = admin.describe_log_dirs()
    return {d["log_dir"]: d["error_code"] for d in described[0]["log_dirs"]}


def _check_only_failing_dir_is_offline(proc: BrokerProcess, topic: str, placement: dict[int, Path],
                                       healthy: Path, failing: Path) -> None:
    on_healthy = next(p for p, d in placement.items() if d == healthy)
    errors = _log_dir_errors(proc)
    assert errors[str(failing.absolute())] == KAFKA_STORAGE_ERROR
    assert errors[str(healthy.absolute())] == 0
    # the healthy dir keeps accepting writes, and they are readable
    assert _produce(proc, topic, on_healthy, 20, 100) == [None] * 20
    records = kp_read(proc.bootstrap, topic, PARTITIONS, expected=10_000, timeout=3)
    assert sum(1 for r in records if r.partition == on_healthy) >= 20
    assert proc.is_running()
    # the operator's view: `pybroker health` fails (exit 1) naming the dir; log-dirs shows its error
    health = CliRunner().invoke(cli, ["health", "--json", "--bootstrap-server", proc.bootstrap])
    assert health.exit_code == 1, health.output
    checks = {c["check"]: c for c in json.loads(health.stdout)["checks"]}
    assert not checks["log_dirs"]["ok"] and str(failing.absolute()) in checks["log_dirs"]["detail"]
    dirs = CliRunner().invoke(cli, ["log-dirs", "--json", "--bootstrap-server", proc.bootstrap])
    assert {d["log_dir"]: d["error"] for d in json.loads(dirs.stdout)}[str(failing.absolute())] == \
        "KAFKA_STORAGE_ERROR"


def test_a_full_tmpfs_takes_only_its_dir_offline(broker_factory: Callable[..., BrokerProcess],
                                                 new_topic: Callable[..., str], tmp_path: Path,
                                                 small_tmpfs: Path) -> None:
    topic = new_topic()
    healthy = tmp_path / "healthy"
    proc, placement = _two_dir_broker(broker_factory, healthy, small_tmpfs, topic)
    on_failing = next(p for p, d in placement.items() if d == small_tmpfs)
    reports = _produce(proc, topic, on_failing, 400, 10_000)  # 4 MB into 2 MB: ENOSPC on the way
    failures = [r for r in reports if r is not None]
    assert failures, "the full dir should have refused writes"
    assert any(r.code() == KafkaError.KAFKA_STORAGE_ERROR for r in failures), failures[:3]
    assert _raw_codes(proc, topic, on_failing) == (KAFKA_STORAGE_ERROR, KAFKA_STORAGE_ERROR)
    _check_only_failing_dir_is_offline(proc, topic, placement, healthy, small_tmpfs)
    assert "log dir offline" in proc.log_tail(200)


def test_a_read_only_remount_takes_only_its_dir_offline(broker_factory: Callable[..., BrokerProcess],
                                                       new_topic: Callable[..., str], tmp_path: Path,
                                                       small_tmpfs: Path) -> None:
    topic = new_topic()
    healthy = tmp_path / "healthy"
    proc, placement = _two_dir_broker(broker_factory, healthy, small_tmpfs, topic)
    on_failing = next(p for p, d in placement.items() if d == small_tmpfs)
    assert _produce(proc, topic, on_failing, 5, 100) == [None] * 5
    _make_read_only(small_tmpfs)
    _until_offline(proc, small_tmpfs)  # the next checkpoint or segment there meets EROFS
    assert _raw_codes(proc, topic, on_failing) == (KAFKA_STORAGE_ERROR, KAFKA_STORAGE_ERROR)
    _check_only_failing_dir_is_offline(proc, topic, placement, healthy, small_tmpfs)
    assert "Read-only file system" in proc.log_tail(200)
    proc.stop()  # stopping with an offline dir is still orderly


def test_the_broker_exits_non_zero_when_its_only_dir_fails(broker_factory: Callable[..., BrokerProcess],
                                                           new_topic: Callable[..., str],
                                                           small_tmpfs: Path) -> None:
    proc = broker_factory({"log.flush.offset.checkpoint.interval.ms": "500"}, log_dirs=[small_tmpfs])
    topic = new_topic()
    with kp_admin(proc.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    _make_read_only(small_tmpfs)
    try:
        _produce(proc, topic, 0, 3, 100)
        assert proc.proc is not None
        code = proc.proc.wait(30)
        assert code not in (0, None)
        assert "every log dir is offline" in proc.log_tail(100)
    finally:
        with contextlib.suppress(Exception):
            proc.close()


def test_a_vanished_dir_goes_offline_and_new_topics_avoid_it(broker_factory: Callable[..., BrokerProcess],
                                                             new_topic: Callable[..., str], tmp_path: Path) -> None:
    """No mount needed: a dir removed under the running broker fails its next checkpoint (ENOENT)."""
    topic = new_topic()
    healthy, doomed = tmp_path / "healthy", tmp_path / "doomed"
    proc, placement = _two_dir_broker(broker_factory, healthy, doomed, topic)
    on_doomed = next(p for p, d in placement.items() if d == doomed)
    shutil.rmtree(doomed)
    _until_offline(proc, doomed)
    assert _raw_codes(proc, topic, on_doomed) == (KAFKA_STORAGE_ERROR, KAFKA_STORAGE_ERROR)
    _check_only_failing_dir_is_offline(proc, topic, placement, healthy, doomed)
    later = new_topic("later")
    with kp_admin(proc.bootstrap) as admin:
        admin.create_topics([NewTopic(later, 2, 1)])
    assert all((healthy / f"{later}-{p}").is_dir() for p in range(2))
    # DeleteRecords cannot move a start it could not save (asked directly: clients see no leader to ask)
    with WireClient(proc.bootstrap) as client:
        answer = client.call(DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsTopic(
            name=topic, partitions=[DeleteRecordsPartition(partition_index=on_doomed, offset=0)])]))
    assert answer.topics[0].partitions[0].error_code == KAFKA_STORAGE_ERROR
