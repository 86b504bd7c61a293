"""The failure channel and what an offline dir means to the log manager (no mounts needed here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.storage.errors import LogDirsOfflineError
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir_failure import LogDirFailureChannel
from pybroker.storage.log_manager import LogManager


def test_a_dir_goes_offline_once_and_listeners_hear_it_once() -> None:
    channel = LogDirFailureChannel()
    heard: list[Path] = []
    channel.on_offline(lambda d, exc: heard.append(d))
    assert channel.report(Path("/a"), OSError(28, "No space left on device"))
    assert not channel.report(Path("/a"), OSError(5, "I/O error"))
    assert heard == [Path("/a")] and not channel.is_online(Path("/a")) and channel.is_online(Path("/b"))
    assert "No space left" in channel.offline[Path("/a")]


def test_a_failing_listener_does_not_stop_the_others() -> None:
    channel = LogDirFailureChannel()
    heard: list[Path] = []

    def broken(d: Path, exc: BaseException) -> None:
        raise RuntimeError("boom")

    channel.on_offline(broken)
    channel.on_offline(lambda d, exc: heard.append(d))
    channel.report(Path("/a"), OSError(5, "I/O error"))
    assert heard == [Path("/a")]


def test_offline_dirs_take_no_new_partitions_no_checkpoints_and_no_clean_marker(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    logs = LogManager([a, b], node_id=1, log_config_for=lambda overrides: LogConfig())
    logs.startup()
    logs.create_topic("before", 2, {})
    logs.checkpoint()
    on_b = next(log for log in logs.logs() if logs.dir_of(log.topic, log.partition) == b.absolute())
    logs.report_io_error(on_b, OSError(30, "Read-only file system"))
    assert logs.offline_dirs == {b.absolute()} and not logs.is_online(on_b)
    logs.create_topic("after", 2, {})
    assert {logs.dir_of("after", p) for p in range(2)} == {a.absolute()}
    before = (b / "recovery-point-offset-checkpoint").stat().st_mtime_ns
    logs.checkpoint()
    assert (b / "recovery-point-offset-checkpoint").stat().st_mtime_ns == before
    logs.shutdown()
    assert (a / ".kafka_cleanshutdown").exists() and not (b / ".kafka_cleanshutdown").exists()


def test_no_online_dir_left_refuses_new_topics(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "only"], node_id=1, log_config_for=lambda overrides: LogConfig())
    logs.startup()
    logs.failures.report((tmp_path / "only").absolute(), OSError(5, "I/O error"))
    with pytest.raises(LogDirsOfflineError):
        logs.create_topic("t", 1, {})
    logs.shutdown()


def test_a_dir_failing_while_a_partition_is_made_goes_offline_and_the_next_dir_takes_it(tmp_path: Path) -> None:
    import shutil

    a, b = tmp_path / "a", tmp_path / "b"
    logs = LogManager([a, b], node_id=1, log_config_for=lambda overrides: LogConfig())
    logs.startup()
    logs.create_topic("first", 1, {})
    emptier = a if logs.dir_of("first", 0) == b.absolute() else b  # the next partition would go here
    shutil.rmtree(emptier)
    logs.create_topic("second", 2, {})
    assert logs.offline_dirs == {emptier.absolute()}
    assert {logs.dir_of("second", p) for p in range(2)} == {({a, b} - {emptier}).pop().absolute()}
    logs.shutdown()
