"""The grid runs each cell's targets in a rotated order, so that no target always goes first, every
target's consume phase reads the same records, and each cell's topic is deleted, its files gone from the disk,
before the next phase."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench.grid import rotated


def test_each_cell_starts_one_target_further_on() -> None:
    names = ["pybroker", "kafka", "kafka-fsync", "null"]
    orders = [rotated(names, turn) for turn in range(5)]
    assert [order[0] for order in orders] == ["pybroker", "kafka", "kafka-fsync", "null", "pybroker"]
    assert all(sorted(order) == sorted(names) for order in orders)
    assert rotated([], 3) == [] and rotated(["one"], 7) == ["one"]


def test_every_target_consumes_records_written_for_it_from_a_batch_boundary(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The consume phase reads what an untimed fill wrote after the produce phase, an even share of every
    partition, from where the phase's records end (a batch starts there). Read from inside the phase's
    records, it was sent the rest of the batch holding its first offset, uncounted: about half a 1 MB batch
    per partition over 1,024 partitions, 1.6 GB sent for 1 GB counted on the broker whose phase wrote most."""
    from bench.fleet import consume_slices
    from bench.grid import fill_for_consume

    class _Fleet:
        asked: dict[int, int] = {}

        def fill(self, bootstrap: str, topic: str, counts: dict[int, int], size: int,
                 deadline_s: float) -> object:
            _Fleet.asked = dict(counts)
            return type("Result", (), {"per_partition": dict(counts)})()

    class _Broker:
        bootstrap = "unused:9092"

    fleet: Any = _Fleet()
    broker: Any = _Broker()
    starts, ends = fill_for_consume(fleet, "any", broker, "t", 1024, 4, {0: 300, 1: 20}, 198, 60.0)
    assert _Fleet.asked == {0: 50, 1: 50, 2: 50, 3: 50}  # every partition its share, however full it was
    assert starts == {0: 300, 1: 20, 2: 0, 3: 0} and ends == {0: 350, 1: 70, 2: 50, 3: 50}
    assert "writing 200 records (50 per partition)" in capsys.readouterr().out
    slices = consume_slices(ends, 2, starts)
    assert sorted(r for s in slices for r in s) == [(0, 300, 350), (1, 20, 70), (2, 0, 50), (3, 0, 50)]
    split = consume_slices({0: 100}, 2, {0: 60})
    assert split == [[(0, 60, 80)], [(0, 80, 100)]]


def test_a_cells_topic_is_deleted_and_its_files_gone_before_the_next_phase(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The grid deletes a cell's topic on a disk target once its consume phase is done, and waits until the
    broker has let go of its files: the full grid writes more than the disk has free, and a removal left to
    happen later is discard I/O in some other phase. A deletion that fails says why (it once failed
    silently on every call)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from bench.grid import COMMON, DELETE_SOON, create_topic, delete_topic, drop_topic, held_files
    from tests.integration.brokers import BrokerProcess, kill_all

    broker = BrokerProcess(tmp_path / "broker", dict(DELETE_SOON))
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **COMMON})
        create_topic(broker.bootstrap, "cell", 2)
        assert delete_topic(broker.bootstrap, "cell") is None
        assert "cell" not in admin.list_topics(timeout=10).topics
        failure = delete_topic(broker.bootstrap, "never-made")
        assert failure is not None and "UNKNOWN_TOPIC" in failure

        create_topic(broker.bootstrap, "written", 2)
        producer = Producer({"bootstrap.servers": broker.bootstrap, **COMMON})
        for i in range(200):
            producer.produce("written", b"x" * 1000, partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", **COMMON})
        consumer.assign([TopicPartition("written", 0, 0)])
        assert consumer.poll(30) is not None  # a fetch: the broker has the segment open
        consumer.close()
        assert held_files(broker.pid, broker.log_dirs, "written") >= 2  # its two partition dirs
        drop_topic("pybroker", broker, "written", timeout_s=30)
        assert held_files(broker.pid, broker.log_dirs, "written") == 0  # nor an unlinked file still open
        assert "still on disk" not in capsys.readouterr().out

        drop_topic("pybroker", broker, "never-made", timeout_s=1)
        assert "never-made could not be deleted" in capsys.readouterr().out
    finally:
        broker.close()
        kill_all()


def test_the_latency_phase_reads_pybrokers_loop_stalls(tmp_path: Path) -> None:
    """Over each latency window the bench reads how often pybroker's event loop woke late (its
    `pybroker_event_loop_lag_seconds`), so a window's tail says whether the loop stood still; a broker
    without that family (Kafka, Tansu) gives None."""
    from bench.grid import loop_late_wakes
    from bench.readiness import PybrokerTarget
    from tests.integration.brokers import BrokerProcess, kill_all

    broker = PybrokerTarget(tmp_path / "broker", {})
    broker.start()
    try:
        first = loop_late_wakes(broker)
        assert first is not None and first >= 0
        _, page = broker.http_get("/metrics")
        assert "pybroker_event_loop_lag_seconds_count" in page and "pybroker_gc_pause_seconds" in page
        assert loop_late_wakes(BrokerProcess(tmp_path / "other", {})) is None
    finally:
        broker.close()
        kill_all()


def test_a_consume_phase_reads_its_records_once_per_pass(tmp_path: Path) -> None:
    """A consume phase of large records reads the fill's records several times over (`CONSUME_PASSES`), each
    pass from every range's start again: one 1 GB read of 10 KiB records lasted under a second, a tenth of
    it the consumers' start, and repetitions of a cell spread by up to a factor of two."""
    from confluent_kafka import Producer

    from bench.fleet import consume_job
    from bench.grid import COMMON, consume_passes, create_topic
    from tests.integration.brokers import BrokerProcess, kill_all

    assert [consume_passes(size) for size in (100, 1023, 1024, 10239, 10240, 1 << 20)] == [1, 1, 2, 2, 4, 4]

    class _Now:
        def start(self) -> float:
            return time.monotonic()

    broker = BrokerProcess(tmp_path / "broker", {})
    broker.start()
    try:
        create_topic(broker.bootstrap, "passes", 2)
        producer = Producer({"bootstrap.servers": broker.bootstrap, **COMMON})
        for i in range(300):
            producer.produce("passes", b"x" * 100, partition=i % 2)
        assert producer.flush(30) == 0
        sync: Any = _Now()
        slices = [(0, 50, 150), (1, 0, 150)]
        for passes in (1, 3):
            result = consume_job(sync, broker.bootstrap, "passes", slices, 60.0, 100, passes)
            assert (result.records, result.payload_bytes, result.note) == (250 * passes, 25_000 * passes, "")
    finally:
        broker.close()
        kill_all()
