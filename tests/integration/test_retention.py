"""Retention and DeleteRecords with the real process: old data leaves the disk and stays gone.

Time and size retention move the earliest offset a consumer sees and remove the segment files;
DeleteRecords (kafka-python's admin client) moves it at once and a restart does not bring the records
back; DescribeLogDirs shows where each partition lives and how large it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import OffsetOutOfRangeError

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_admin, kp_producer

RECORDS = 300
FAST_RETENTION = {"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "100"}


def _fill(proc: BrokerProcess, topic: str, configs: dict[str, str]) -> None:
    with kp_admin(proc.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"segment.bytes": "4096", **configs})])
    with kp_producer(proc.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(RECORDS):  # one batch per record, so the segments roll at a predictable rate
            producer.send(topic, b"x" * 100, key=b"%d" % i, partition=0).get(timeout=10)


def _earliest(proc: BrokerProcess, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, request_timeout_ms=10_000)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.beginning_offsets([tp])[tp])
    finally:
        consumer.close()


def _segments(proc: BrokerProcess, topic: str) -> list[Path]:
    return sorted((proc.log_dirs[0] / f"{topic}-0").glob("*.log"))


def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout}s")


def test_time_retention_moves_the_earliest_offset_and_removes_files(broker_factory: Callable[..., BrokerProcess],
                                                                    new_topic: Callable[..., str]) -> None:
    proc = broker_factory(FAST_RETENTION)
    topic = new_topic()
    _fill(proc, topic, {"retention.ms": "1500"})
    before = _segments(proc, topic)
    assert len(before) > 3
    _wait(lambda: _earliest(proc, topic) > 0, 30, "time retention")
    _wait(lambda: len(_segments(proc, topic)) == 1, 10, "segment files removal")
    assert _earliest(proc, topic) == int(_segments(proc, topic)[0].stem)


def test_size_retention_from_the_broker_default_keeps_the_newest(broker_factory: Callable[..., BrokerProcess],
                                                                 new_topic: Callable[..., str]) -> None:
    proc = broker_factory({**FAST_RETENTION, "log.retention.bytes": "10000"})
    topic = new_topic()
    _fill(proc, topic, {})
    _wait(lambda: _earliest(proc, topic) > 0, 30, "size retention")
    time.sleep(1)  # another retention pass: nothing more may go
    sizes = [p.stat().st_size for p in _segments(proc, topic)]
    assert sum(sizes) - sizes[0] < 10000 <= sum(sizes)  # the oldest left is needed to stay at the limit
    earliest = _earliest(proc, topic)
    assert 0 < earliest < RECORDS
    consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, auto_offset_reset="earliest",
                             request_timeout_ms=10_000, fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 20
        while len(got) < RECORDS - earliest and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                got += [r.offset for r in records]
        assert got == list(range(earliest, RECORDS))
    finally:
        consumer.close()


def test_delete_records_moves_the_start_and_survives_a_kill_9(broker_factory: Callable[..., BrokerProcess],
                                                             new_topic: Callable[..., str]) -> None:
    proc = broker_factory(FAST_RETENTION, needs_restart=True)
    topic = new_topic()
    _fill(proc, topic, {})
    tp = TopicPartition(topic, 0)
    with kp_admin(proc.bootstrap) as admin:
        result = admin.delete_records({tp: 200})
    assert result[tp]["low_watermark"] == 200 and result[tp]["error_code"] == 0
    assert _earliest(proc, topic) == 200
    _wait(lambda: int(_segments(proc, topic)[0].stem) > 0, 10, "segments below the new start removed")
    proc.kill9()
    proc.start()
    assert _earliest(proc, topic) == 200
    with kp_admin(proc.bootstrap) as admin, pytest.raises(OffsetOutOfRangeError):
        admin.delete_records({tp: RECORDS + 5})  # past the high watermark


def test_describe_log_dirs_lists_partitions_with_sizes(broker_factory: Callable[..., BrokerProcess],
                                                      new_topic: Callable[..., str], tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    proc = broker_factory({}, log_dirs=dirs)
    topic = new_topic()
    with kp_admin(proc.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 4, 1)])
    with kp_producer(proc.bootstrap, acks="all") as producer:
        for p in range(4):
            producer.send(topic, b"v" * 10, partition=p)
        producer.flush(20)
    with kp_admin(proc.bootstrap) as admin:
        described = admin.describe_log_dirs()
    log_dirs = described[0]["log_dirs"]
    assert {d["log_dir"] for d in log_dirs} == {str(d.absolute()) for d in dirs}
    placed = {d["log_dir"]: [p for t in d["topics"] if t["name"] == topic for p in t["partitions"]]
              for d in log_dirs}
    assert sorted(len(parts) for parts in placed.values()) == [2, 2]  # the dir with fewest partitions first
    assert all(p["partition_size"] > 0 for parts in placed.values() for p in parts)
    assert all(d["error_code"] == 0 and d["total_bytes"] > 0 for d in log_dirs)
