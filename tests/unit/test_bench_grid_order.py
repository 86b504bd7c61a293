"""The grid runs each cell's targets in a rotated order, so that no target always goes first, every
target's consume phase reads the same records, and a repetition's topics are deleted before the next."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_a_repetitions_topics_are_deleted_and_a_failed_deletion_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The grid deletes the topics of a repetition before the next one: a repetition writes about 30 GB.
    A deletion that fails says why (it once failed silently on every call)."""
    from confluent_kafka.admin import AdminClient

    from bench.grid import COMMON, create_topic, delete_between_repetitions, delete_topic
    from tests.integration.brokers import BrokerProcess, kill_all

    broker = BrokerProcess(tmp_path / "broker", {})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **COMMON})
        create_topic(broker.bootstrap, "cell", 2)
        assert delete_topic(broker.bootstrap, "cell") is None
        assert "cell" not in admin.list_topics(timeout=10).topics
        failure = delete_topic(broker.bootstrap, "never-made")
        assert failure is not None and "UNKNOWN_TOPIC" in failure

        for topic in ("a", "b"):
            create_topic(broker.bootstrap, topic, 1)
        delete_between_repetitions([("pybroker", broker, "a"), ("pybroker", broker, "b"),
                                    ("pybroker", broker, "never-made")], wait_s=0)
        assert not {"a", "b"} & set(admin.list_topics(timeout=10).topics)
        assert "never-made could not be deleted" in capsys.readouterr().out
    finally:
        broker.close()
        kill_all()
