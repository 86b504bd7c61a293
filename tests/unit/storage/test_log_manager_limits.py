"""The log manager's partition cap, its thread-safe topic changes, resource errors and idle segment files."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from pybroker.storage import log_manager as log_manager_module
from pybroker.storage.errors import PartitionLimitError, TopicExistsError
from pybroker.storage.log import IDLE_CLOSE_GRACE_MS, FileRegion
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir_failure import LogDirFailureChannel, is_resource_exhaustion
from pybroker.storage.log_manager import LogManager
from tests.unit.storage.helpers import NOW, append, batch


def _manager(dirs: list[Path], **config: int) -> LogManager:
    manager = LogManager(dirs, node_id=1, log_config_for=lambda _: LogConfig(**config), clock_ms=lambda: NOW)
    manager.startup()
    return manager


def test_the_cap_is_checked_before_any_work_and_counts_what_is_held(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    manager.max_partitions, manager.max_partitions_source = 10, "a test"
    manager.create_topic("t", 6, {})
    with pytest.raises(PartitionLimitError, match="more than its limit of 10 \\(a test\\)"):
        manager.create_topic("u", 2**31 - 1, {})
    with pytest.raises(PartitionLimitError):
        manager.add_partitions("t", 11)
    assert sorted(p.name for p in (tmp_path / "a").iterdir() if p.is_dir()) == [f"t-{i}" for i in range(6)]
    manager.add_partitions("t", 10)
    manager.delete_topic("t")
    manager.create_topic("u", 10, {})  # deleting gave the room back
    assert manager.partition_count == 10
    manager.shutdown()


def test_placement_keeps_dirs_even_and_deletion_gives_slots_back(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    manager = _manager(dirs)
    manager.create_topic("t", 7, {})
    manager.create_topic("u", 2, {})
    counts = sorted(sum(1 for p in d.iterdir() if p.is_dir()) for d in dirs)
    assert counts == [3, 3, 3]
    manager.delete_topic("t")
    manager.create_topic("v", 4, {})
    assert sorted(sum(1 for p in d.iterdir() if p.is_dir() and not p.name.endswith("-delete"))
                  for d in dirs) == [2, 2, 2]
    manager.shutdown()


def test_a_creation_that_runs_out_of_descriptors_fails_alone_and_removes_only_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _manager([tmp_path / "a"])
    manager.create_topic("keep", 2, {})
    real = manager._create_log
    made = 0

    def flaky(*args: object) -> object:
        nonlocal made
        if made == 3:
            raise OSError(errno.EMFILE, "Too many open files")
        made += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(manager, "_create_log", flaky)
    with pytest.raises(OSError, match="Too many open files"):
        manager.create_topic("big", 2**20, {})
    assert manager.offline_dirs == set(), "EMFILE took the dir offline"
    assert manager.failures.resource_errors == 1
    assert "big" not in manager.topics() and manager.get_log("big", 0) is None
    assert sorted(p.name for p in (tmp_path / "a").iterdir() if p.is_dir()) == ["keep-0", "keep-1"]
    assert manager.partition_count == 2
    monkeypatch.setattr(manager, "_create_log", real)
    manager.create_topic("big", 3, {})  # the name is free again
    manager.shutdown()


def test_resource_errors_are_not_disk_failures() -> None:
    channel = LogDirFailureChannel()
    for code in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
        assert is_resource_exhaustion(OSError(code, "x"))
        assert channel.report(Path("/d"), OSError(code, "x")) is False
    assert channel.is_online(Path("/d"))
    assert channel.report(Path("/d"), OSError(errno.EIO, "x")) is True
    assert not channel.is_online(Path("/d"))


def test_the_loop_never_sees_a_half_made_topic(tmp_path: Path) -> None:
    """A reader polling while another thread creates: a topic is seen only with all its logs."""
    manager = _manager([tmp_path / "a"])
    seen_partial: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for name, info in manager.topics().items():
                if any(manager.get_log(name, p) is None for p in range(info.num_partitions)):
                    seen_partial.append(name)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        creators = [threading.Thread(target=manager.create_topic, args=(f"t{i}", 40, {})) for i in range(4)]
        for creator in creators:
            creator.start()
        for creator in creators:
            creator.join()
        manager.add_partitions("t0", 80)
    finally:
        stop.set()
        thread.join()
    assert seen_partial == []
    assert sorted(manager.topics()) == ["t0", "t1", "t2", "t3"]
    assert manager.partition_count == 200
    manager.shutdown()


def test_two_creations_of_one_name_race_to_one_winner(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"])
    outcomes: list[str] = []

    def create() -> None:
        try:
            manager.create_topic("same", 30, {})
            outcomes.append("made")
        except TopicExistsError:
            outcomes.append("exists")

    threads = [threading.Thread(target=create) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["exists", "exists", "made"]
    assert sum(1 for p in (tmp_path / "a").iterdir() if p.name.startswith("same-")) == 30
    manager.shutdown()


def test_idle_segment_files_are_closed_and_reopened_but_not_under_a_pending_read(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a"], file_delete_delay_ms=0)
    manager.create_topic("t", 2, {})
    busy, idle = manager.get_log("t", 0), manager.get_log("t", 1)
    assert busy is not None and idle is not None
    append(busy, batch(3))
    append(idle, batch(3))
    region = busy.read(0, 1 << 20).region  # a response not yet sent holds the file
    assert isinstance(region, FileRegion)
    later = NOW + IDLE_CLOSE_GRACE_MS
    assert manager.close_idle_files(NOW) == 0  # first sweep: both were used since the last one
    assert manager.close_idle_files(NOW) == 0  # second: both are let go of, none closed yet
    assert idle.active_segment._file is None and busy.active_segment._file is None
    assert manager.close_idle_files(later - 1) == 0  # a grace period even with file.delete.delay.ms=0
    assert manager.close_idle_files(later) == 1  # then `idle` closes; `busy`'s file is held by the region
    assert region.read_bytes()  # the pending read still works
    del region
    assert manager.close_idle_files(later) == 1  # now nobody holds it
    append(idle, batch(2))  # reopened on use
    assert idle.log_end_offset == 5
    manager.shutdown()


def test_the_sweep_runs_from_the_flush_policy_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _manager([tmp_path / "a"], file_delete_delay_ms=0)
    manager.create_topic("t", 1, {})
    swept: list[int] = []
    monkeypatch.setattr(manager, "close_idle_files", swept.append)
    manager.flush_dirty(NOW + log_manager_module.IDLE_FILE_SWEEP_MS - 1)
    assert swept == []
    manager.flush_dirty(NOW + log_manager_module.IDLE_FILE_SWEEP_MS)
    assert swept == [NOW + log_manager_module.IDLE_FILE_SWEEP_MS]
    manager.shutdown()


def test_a_batch_creates_what_passes_saves_once_and_refuses_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _manager([tmp_path / "a"])
    manager.max_partitions = 10
    manager.create_topic("old", 1, {})
    saves: list[int] = []
    real_save = manager._store.save
    monkeypatch.setattr(manager._store, "save", lambda topics: (saves.append(len(topics)), real_save(topics)))
    outcomes = manager.create_topics([("a", 3, {}), ("old", 1, {}), ("a.b", 1, {}), ("a_b", 1, {}),
                                      ("big", 8, {}), ("c", 5, {})])
    assert {name: type(o).__name__ for name, o in outcomes.items()} == {
        "a": "TopicInfo", "old": "TopicExistsError", "a.b": "TopicInfo", "a_b": "InvalidTopicError",
        "big": "PartitionLimitError", "c": "TopicInfo"}
    assert saves == [4], "one save for the whole batch"
    assert manager.partition_count == 10
    deleted = manager.delete_topics(["a", "nope", "c"])
    assert deleted["a"] is None and deleted["c"] is None and type(deleted["nope"]).__name__ == "UnknownTopicError"
    assert saves == [4, 2]
    assert sorted(manager.topics()) == ["a.b", "old"]
    manager.shutdown()
