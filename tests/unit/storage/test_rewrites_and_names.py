"""Files the broker rewrites from several threads, topic names that must be refused, and long names.

The concurrency test drives a real `LogManager` the way the broker does: DeleteRecords, retention
passes and checkpoint passes on worker threads at once. Before each file had one writer and temp names
of its own, two writers shared `<file>.tmp`, the losing rename failed with FileNotFoundError and the
log dir went offline.
"""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import pytest

from pybroker.storage.checkpoints import LOG_START_OFFSET, RECOVERY_POINT, read_checkpoint
from pybroker.storage.dir_names import MAX_NAME_BYTES, renamed_dir_name
from pybroker.storage.errors import InvalidTopicError
from pybroker.storage.files import atomic_write
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_manager import LogManager, validate_topic_name
from tests.unit.storage.helpers import NOW, append, batch

LONGEST = "x" * 249


def _manager(directory: Path, **config: int) -> LogManager:
    manager = LogManager([directory], node_id=1, log_config_for=lambda overrides: LogConfig(**config),
                         clock_ms=lambda: NOW)
    manager.startup()
    return manager


@pytest.mark.parametrize("name", ["evil\n", "evil\r", "evil ", " evil", "a\nb", "x" * 250, ".", "..", "",
                                  "é", "a/b", "a\x00"])
def test_illegal_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_legal_names_pass() -> None:
    for name in ("a", "A.b_c-9", LONGEST, "...", "__consumer_offsets"):
        validate_topic_name(name)


def test_renamed_dir_names_fit_and_keep_their_suffix() -> None:
    name = renamed_dir_name(f"{LONGEST}-2147483647", "-delete")
    assert len(name.encode()) == MAX_NAME_BYTES and name.endswith("-delete")
    assert name.startswith("x" * 100) and "-2147483647." in name
    assert renamed_dir_name("short-3", "-stray").startswith("short-3.")
    assert len(os.fsencode(renamed_dir_name("é" * 200 + "-0", "-delete"))) <= MAX_NAME_BYTES


def test_a_topic_with_the_longest_legal_name_is_deleted(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.create_topic(LONGEST, 2, {})
    log = manager.get_log(LONGEST, 1)
    assert log is not None
    append(log, batch(5))
    manager.delete_topic(LONGEST)
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    manager.shutdown()


def test_startup_removes_shortened_delete_dirs_and_temp_leftovers(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.create_topic(LONGEST, 1, {})
    manager.create_topic("kept", 1, {})
    manager.shutdown()
    # a crash between the rename and the removal, and during two rewrites
    doomed = tmp_path / renamed_dir_name(f"{LONGEST}-0", "-delete")
    (tmp_path / f"{LONGEST}-0").rename(doomed)
    (doomed / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "recovery-point-offset-checkpoint.0123456789abcdef.tmp").write_bytes(b"half")
    (tmp_path / "kept-0" / "partition.metadata.0123456789abcdef.tmp").write_bytes(b"half")
    again = _manager(tmp_path)
    assert not doomed.exists()
    assert not list(tmp_path.glob("*.tmp")) and not list((tmp_path / "kept-0").glob("*.tmp"))
    assert again.get_log(LONGEST, 0) is not None  # recreated empty, as any lost partition dir
    again.shutdown()


def test_a_topic_an_older_version_let_in_does_not_cost_the_others_their_checkpoints(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.create_topic("good", 1, {})
    log = manager.get_log("good", 0)
    assert log is not None
    append(log, batch(10))
    manager.delete_records("good", 0, 5)
    manager.shutdown()
    # an older version accepted "evil\n" (its `$` matched before the newline): put it in the table
    table = json.loads((tmp_path / "pybroker-topics.json").read_bytes())
    table["topics"].append({"name": "evil\n", "topic_id": "00000000-0000-0000-0000-000000000009",
                            "partitions": 1, "configs": {}})
    (tmp_path / "pybroker-topics.json").write_text(json.dumps(table))
    for _ in range(2):  # its partition is made, checkpointed (left out), found again
        again = _manager(tmp_path)
        evil = again.get_log("evil\n", 0)
        assert evil is not None
        append(evil, batch(2))
        good = again.get_log("good", 0)
        assert good is not None and good.log_start_offset == 5 and good.log_end_offset == 10
        again.checkpoint()
        assert read_checkpoint(tmp_path / LOG_START_OFFSET) == {("good", 0): 5}
        again.shutdown()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-stray")]


def test_concurrent_rewrites_of_one_file_never_collide(tmp_path: Path) -> None:
    path = tmp_path / "file"
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(200):
                atomic_write(path, b"%d %d\n" % (n, i) * 50, sync=False)
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    lines = path.read_bytes().splitlines()
    assert len(lines) == 50 and len(set(lines)) == 1  # one writer's content, whole
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_concurrent_delete_records_retention_and_checkpoints_keep_the_dir_online(tmp_path: Path) -> None:
    partitions, records = 4, 60
    manager = _manager(tmp_path, segment_bytes=400, file_delete_delay_ms=0)
    manager.create_topic("t", partitions, {})
    logs = [manager.get_log("t", p) for p in range(partitions)]
    for log in logs:
        assert log is not None
        for _ in range(records // 2):
            append(log, batch(2))
    targets = {p: random.Random(p).sample(range(1, records + 1), 30) for p in range(partitions)}
    errors: list[BaseException] = []
    start = threading.Barrier(partitions * 2 + 2)

    def guarded(work: object) -> object:
        def run(*args: int) -> None:
            start.wait()
            try:
                work(*args)  # type: ignore[operator]
            except BaseException as exc:  # pragma: no cover - the failure being tested for
                errors.append(exc)
        return run

    def delete_records(partition: int, half: int) -> None:
        for offset in targets[partition][half::2]:
            manager.delete_records("t", partition, offset)

    def retention() -> None:
        for _ in range(60):
            manager.enforce_retention(NOW)

    def checkpoints() -> None:
        for _ in range(60):
            manager.checkpoint()

    threads = [threading.Thread(target=guarded(delete_records), args=(p, half))
               for p in range(partitions) for half in (0, 1)]
    threads += [threading.Thread(target=guarded(retention)), threading.Thread(target=guarded(checkpoints))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and not manager.offline_dirs
    expected = {("t", p): max(targets[p]) for p in range(partitions)}
    assert {(log.topic, log.partition): log.log_start_offset for log in logs if log} == expected
    assert read_checkpoint(tmp_path / LOG_START_OFFSET) == expected
    assert set(read_checkpoint(tmp_path / RECOVERY_POINT)) == set(expected)
    assert not list(tmp_path.glob("*.tmp"))
    manager.shutdown()
    again = _manager(tmp_path, segment_bytes=400, file_delete_delay_ms=0)
    for p in range(partitions):
        log = again.get_log("t", p)
        assert log is not None and log.log_start_offset == expected[("t", p)] and log.log_end_offset == records
    again.shutdown()
