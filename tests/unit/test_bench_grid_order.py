"""The grid runs each cell's targets in a rotated order, so that no target always goes first, every
target's consume phase reads the same records, and each cell's topic is deleted after it."""

from __future__ import annotations

from pathlib import Path

from bench.grid import rotated


def test_each_cell_starts_one_target_further_on() -> None:
    names = ["pybroker", "kafka", "kafka-fsync", "null"]
    orders = [rotated(names, turn) for turn in range(5)]
    assert [order[0] for order in orders] == ["pybroker", "kafka", "kafka-fsync", "null", "pybroker"]
    assert all(sorted(order) == sorted(names) for order in orders)
    assert rotated([], 3) == [] and rotated(["one"], 7) == ["one"]


def test_every_target_consumes_the_newest_records() -> None:
    from bench.fleet import consume_slices
    from bench.grid import newest

    starts = newest({0: 100, 1: 30, 2: 70}, 120, 3)
    assert starts == {0: 60, 1: 0, 2: 30}  # 40 from each, a partition holding fewer read whole
    slices = consume_slices({0: 100, 1: 30, 2: 70}, 2, starts)
    assert sorted(r for s in slices for r in s) == [(0, 60, 100), (1, 0, 30), (2, 30, 70)]
    split = consume_slices({0: 100}, 2, {0: 60})
    assert split == [[(0, 60, 80)], [(0, 80, 100)]]


def test_a_cells_topic_is_deleted_and_a_failed_deletion_is_said(tmp_path: Path) -> None:
    """The grid deletes each cell's topic once its phases are done: tens of GB otherwise stay on disk for
    the rest of the run. A deletion that fails says why (it once failed silently on every call)."""
    from confluent_kafka.admin import AdminClient

    from bench.grid import COMMON, create_topic, delete_topic
    from tests.integration.brokers import BrokerProcess, kill_all

    broker = BrokerProcess(tmp_path / "broker", {})
    broker.start()
    try:
        create_topic(broker.bootstrap, "cell", 2)
        assert delete_topic(broker.bootstrap, "cell") is None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **COMMON})
        assert "cell" not in admin.list_topics(timeout=10).topics
        failure = delete_topic(broker.bootstrap, "never-made")
        assert failure is not None and "UNKNOWN_TOPIC" in failure
    finally:
        broker.close()
        kill_all()
