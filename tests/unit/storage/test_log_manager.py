"""The log manager: identity files, locking, placement, topic persistence, recovery, flush policy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pybroker.storage.checkpoints import read_checkpoint
from pybroker.storage.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    LogDirLockedError,
    MetaPropertiesError,
    TopicExistsError,
    TopicStoreError,
    UnknownTopicError,
)
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_manager import LogManager
from pybroker.storage.topic_store import kafka_uuid, parse_kafka_uuid
from tests.unit.storage.helpers import NOW, append, batch


def _config(overrides: dict[str, str]) -> LogConfig:
    return LogConfig(flush_interval_messages=int(overrides.get("flush.messages", 2**63 - 1)))


def _manager(dirs: list[Path], node_id: int = 1) -> LogManager:
    manager = LogManager(dirs, node_id=node_id, log_config_for=_config, clock_ms=lambda: NOW)
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


def test_an_unclean_restart_recovers_above_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    append(log, batch(3))
    log.flush()
    manager.checkpoint()
    append(log, batch(3))
    assert read_checkpoint(tmp_path / "a" / "recovery-point-offset-checkpoint") == {("t", 0): 3}
    segment = log.active_segment
    segment.release()  # a crash: no flush, no close, no marker
    for flusher in manager._flushers.values():
        flusher.close()
    for fd in manager._locks:
        os.close(fd)
    with open(segment.log_path, "ab") as handle:
        handle.write(b"\x00" * 40)  # a torn write after the last batch
    again = LogManager([tmp_path / "a"], node_id=1, log_config_for=_config, clock_ms=lambda: NOW)
    [stats] = again.startup()
    assert not stats.clean_shutdown and stats.segments_recovered == 1 and stats.bytes_truncated == 40
    assert stats.partitions == 1
    recovered = again.get_log("t", 0)
    assert recovered is not None and recovered.log_end_offset == 6
    again.shutdown()


def test_second_manager_on_a_locked_dir_fails(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    with pytest.raises(LogDirLockedError, match="in use by another broker"):
        _manager([tmp_path / "b", tmp_path / "a"])
    manager.shutdown()
    _manager([tmp_path / "b", tmp_path / "a"]).shutdown()  # the failed attempt released dir b


def test_meta_properties_names_cluster_and_node(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"], node_id=3)
    props = (tmp_path / "a" / "meta.properties").read_text()
    assert f"cluster.id={manager.cluster_id}" in props and "node.id=3" in props and "version=1" in props
    manager.shutdown()
    with pytest.raises(MetaPropertiesError, match=r"node\.id=3"):
        _manager([tmp_path / "a"], node_id=4)
    other = _manager([tmp_path / "b"], node_id=3)
    other.shutdown()
    with pytest.raises(MetaPropertiesError, match=r"cluster\.id"):
        _manager([tmp_path / "a", tmp_path / "b"], node_id=3)
    again = _manager([tmp_path / "a"], node_id=3)
    assert again.cluster_id == manager.cluster_id
    again.shutdown()


def test_topic_rules(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.create_topic("x.y", 1, {})
    with pytest.raises(TopicExistsError):
        manager.create_topic("x.y", 1, {})
    with pytest.raises(InvalidTopicError, match="collides"):
        manager.create_topic("x_y", 1, {})
    for bad in ("", ".", "..", "a/b", "x" * 250, "spaces here", "ü"):
        with pytest.raises(InvalidTopicError):
            manager.create_topic(bad, 1, {})
    manager.create_topic("x" * 249, 1, {})
    with pytest.raises(InvalidPartitionsError):
        manager.create_topic("none", 0, {})
    manager.add_partitions("x.y", 3)
    assert manager.topics()["x.y"].num_partitions == 3 and manager.get_log("x.y", 2) is not None
    with pytest.raises(InvalidPartitionsError):
        manager.add_partitions("x.y", 2)
    with pytest.raises(UnknownTopicError):
        manager.add_partitions("nope", 2)
    manager.delete_topic("x.y")
    assert "x.y" not in manager.topics() and not list((tmp_path / "a").glob("x.y-*"))
    manager.shutdown()
    again = _manager([tmp_path / "a"])
    assert list(again.topics()) == ["x" * 249]
    again.shutdown()


def test_configs_are_altered_and_persisted(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.create_topic("t", 2, {})
    manager.alter_topic_configs("t", {"flush.messages": "2"})
    log = manager.get_log("t", 1)
    assert log is not None and log.config.flush_interval_messages == 2
    append(log, batch(1))
    manager.flush_dirty(NOW)
    assert log.recovery_point == 0  # one unflushed message, policy says two
    append(log, batch(1))
    manager.flush_dirty(NOW)
    assert log.recovery_point == 2
    manager.shutdown()
    again = _manager([tmp_path / "a"])
    assert again.topics()["t"].configs == {"flush.messages": "2"}
    again.shutdown()


def test_each_topic_loads_with_its_own_settings_resolved_once(tmp_path: Path) -> None:
    """Startup resolves a topic's settings once for all its partitions (per partition, it was a third of
    the start of 5,000 partitions), and never hands one topic's settings to another's logs."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs)
    manager.create_topic("two", 3, {"flush.messages": "2"})
    manager.create_topic("plain", 3, {})
    manager.shutdown()
    asked: list[dict[str, str]] = []

    def counted(overrides: dict[str, str]) -> LogConfig:
        asked.append(dict(overrides))
        return _config(overrides)

    again = LogManager(dirs, node_id=1, log_config_for=counted, clock_ms=lambda: NOW)
    again.startup()
    assert sorted(asked, key=len) == [{}, {"flush.messages": "2"}]
    for partition in range(3):
        two, plain = again.get_log("two", partition), again.get_log("plain", partition)
        assert two is not None and two.config.flush_interval_messages == 2
        assert plain is not None and plain.config.flush_interval_messages == 2**63 - 1
    again.shutdown()


def test_unclaimed_partition_dirs_are_set_aside(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.create_topic("t", 1, {})
    manager.shutdown()
    (tmp_path / "a" / "ghost-0").mkdir()
    (tmp_path / "a" / "t-5").mkdir()
    (tmp_path / "a" / "old-3.abc-delete").mkdir()
    again = _manager([tmp_path / "a"])
    names = sorted(p.name for p in (tmp_path / "a").iterdir() if p.is_dir())
    assert names[0].startswith("ghost-0.") and names[0].endswith("-stray")
    assert names[1] == "t-0" and names[2].startswith("t-5.") and len(names) == 3
    again.shutdown()


def test_a_lost_partition_dir_is_recreated_empty(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.create_topic("t", 2, {})
    manager.shutdown()
    for path in (tmp_path / "a" / "t-1").iterdir():
        path.unlink()
    (tmp_path / "a" / "t-1").rmdir()
    again = _manager([tmp_path / "a"])
    log = again.get_log("t", 1)
    assert log is not None and log.log_end_offset == 0
    again.shutdown()


def test_kafka_uuid_text_form() -> None:
    import uuid

    value = uuid.uuid4()
    assert parse_kafka_uuid(kafka_uuid(value)) == value and "=" not in kafka_uuid(value)


def test_one_unreadable_topic_table_copy_is_outvoted_but_all_unreadable_stops_startup(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs)
    manager.create_topic("t", 1, {})
    manager.shutdown()
    (tmp_path / "a" / "pybroker-topics.json").write_text("{not json")
    again = _manager(dirs)
    assert list(again.topics()) == ["t"]
    again.shutdown()
    for directory in dirs:
        (directory / "pybroker-topics.json").write_bytes(b"\x00" * 10)
    with pytest.raises(TopicStoreError, match="no readable copy"):
        _manager(dirs)
    _manager([tmp_path / "c"]).shutdown()  # the refused start released its locks


def test_deleted_partitions_keep_files_open_for_in_flight_reads(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    append(log, batch(2))
    region = log.read(0, 1 << 20).region
    assert region is not None
    manager.delete_topic("t")
    assert not any(p.name.startswith("t-0") for p in (tmp_path / "a").iterdir())
    assert len(region.read_bytes()) == len(region)
    manager.flush_dirty(NOW + 1)
    assert not region.file.closed
    manager.flush_dirty(NOW + 60_000)  # file.delete.delay.ms passed
    assert region.file.closed
    manager.shutdown()


def test_clean_shutdown_marker_is_kafkas(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.shutdown()
    assert (tmp_path / "a" / ".kafka_cleanshutdown").read_text() == '{"version":"0","broker_epoch":"-1"}'
    assert (tmp_path / "a" / ".lock").exists()


def test_topics_are_found_by_id_across_restart_and_forgotten_on_delete(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    info = manager.create_topic("by-id", 1, {})
    assert manager.topic_by_id(info.topic_id) is info
    manager.shutdown()
    again = _manager([tmp_path / "a"])
    found = again.topic_by_id(info.topic_id)
    assert found is not None and found.name == "by-id"
    again.delete_topic("by-id")
    assert again.topic_by_id(info.topic_id) is None
    again.shutdown()
