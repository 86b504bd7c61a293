"""The log manager: identity files, locking, placement, topic persistence, checkpoints, group commit."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from unittest import mock

import pytest

from pybroker.storage.checkpoints import read_checkpoint, write_checkpoint
from pybroker.storage.errors import (
    InvalidTopicError,
    LogDirLockedError,
    MetaPropertiesError,
    TopicExistsError,
)
from pybroker.storage.flusher import Flusher
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_manager import LogManager
from pybroker.storage.topic_store import kafka_uuid, parse_kafka_uuid
from tests.unit.storage.helpers import append, batch, open_log


def _manager(dirs: list[Path], node_id: int = 1) -> LogManager:
    manager = LogManager(dirs, node_id=node_id, log_config_for=lambda overrides: LogConfig())
    manager.startup()
    return manager


def test_topics_and_data_survive_restart_and_spread_over_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs)
    info = manager.create_topic("orders", 4, {"retention.ms": "1000"})
    log = manager.get_log("orders", 3)
    assert log is not None
    append(log, batch(5))
    assert sorted(sum(1 for p in d.iterdir() if p.name.startswith("orders-")) for d in dirs) == [2, 2]
    assert (log.dir / "partition.metadata").read_text() == f"version: 0\ntopic_id: {kafka_uuid(info.topic_id)}\n"
    manager.shutdown()
    assert all((d / ".kafka_cleanshutdown").exists() for d in dirs)
    again = _manager(dirs)
    restored = again.topics()["orders"]
    assert (restored.topic_id, restored.num_partitions, restored.configs) == (info.topic_id, 4,
                                                                             {"retention.ms": "1000"})
    log = again.get_log("orders", 3)
    assert log is not None and log.log_end_offset == 5
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)
    again.shutdown()


def test_second_manager_on_a_locked_dir_fails(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    with pytest.raises(LogDirLockedError):
        _manager([tmp_path / "a"])
    manager.shutdown()


def test_meta_properties_names_cluster_and_node(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"], node_id=3)
    props = (tmp_path / "a" / "meta.properties").read_text()
    assert f"cluster.id={manager.cluster_id}" in props and "node.id=3" in props
    manager.shutdown()
    with pytest.raises(MetaPropertiesError):
        _manager([tmp_path / "a"], node_id=4)


def test_topic_rules(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.create_topic("x", 1, {})
    with pytest.raises(TopicExistsError):
        manager.create_topic("x", 1, {})
    for bad in ("", ".", "..", "a/b", "x" * 250, "spaces here"):
        with pytest.raises(InvalidTopicError):
            manager.create_topic(bad, 1, {})
    manager.add_partitions("x", 3)
    assert manager.topics()["x"].num_partitions == 3 and manager.get_log("x", 2) is not None
    manager.delete_topic("x")
    assert "x" not in manager.topics() and not list((tmp_path / "a").glob("x-*"))
    manager.shutdown()


def test_checkpoint_files_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(path, {("a", 0): 5, ("b-c", 12): 7})
    assert path.read_text().splitlines()[:2] == ["0", "2"]
    assert read_checkpoint(path) == {("a", 0): 5, ("b-c", 12): 7}
    path.write_text("0\n3\na 0 1\n")
    assert read_checkpoint(path) == {}


def test_kafka_uuid_text_form() -> None:
    import uuid

    value = uuid.uuid4()
    assert parse_kafka_uuid(kafka_uuid(value)) == value and "=" not in kafka_uuid(value)


def test_flusher_answers_only_after_fsync_and_groups_waiters(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    gate = threading.Event()
    calls: list[int] = []
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        gate.wait(5)
        calls.append(fd)
        real_fsync(fd)

    with mock.patch("os.fsync", slow_fsync):
        append(log, batch(2))
        first = flusher.request(log, 2)
        futures = []
        for _ in range(20):
            result = append(log, batch(1))
            futures.append(flusher.request(log, result.last_offset + 1))
        assert not first.done() and not any(f.done() for f in futures)
        gate.set()
        assert first.result(5) >= 2
        assert all(f.result(5) >= 3 for f in futures)
    assert log.recovery_point == log.log_end_offset
    fsyncs_of_log = len([fd for fd in calls if fd == log.active.file.fileno()])
    assert fsyncs_of_log <= 2  # 21 waiters, at most two rounds
    flusher.close()
    log.close()
