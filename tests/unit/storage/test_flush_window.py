"""The acks=1 window (`storage.flush_window`): data nobody fsyncs is fsynced within its log's flush.ms, by
one thread for every log, with logs due together handed over in one wake."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pybroker.storage.flush_window import FlushWindow
from pybroker.storage.log import Log
from pybroker.storage.log_config import LONG_MAX, LogConfig
from pybroker.storage.log_manager import LogManager
from tests.unit.storage.helpers import NOW, append, batch, open_log

WAIT_S = 20.0


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S:.0f} s"
        time.sleep(0.01)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    def config(overrides: dict[str, str]) -> LogConfig:
        return LogConfig(flush_interval_ms=int(overrides.get("flush.ms", 50)))

    logs = LogManager([tmp_path / "a"], node_id=1, log_config_for=config, clock_ms=lambda: NOW)
    logs.startup()
    try:
        yield logs
    finally:
        logs.shutdown()


def _log(manager: LogManager, topic: str, partition: int = 0) -> Log:
    found = manager.get_log(topic, partition)
    assert found is not None
    return found


def test_an_unflushed_append_is_fsynced_once_its_window_passes_and_again_after_the_next(manager: LogManager) -> None:
    manager.create_topic("t", 1, {})
    log = _log(manager, "t")
    window = manager.flush_window
    assert window is not None
    append(log, batch(3))
    manager.dirtied(log)
    manager.dirtied(log)  # a second append before the deadline adds nothing
    assert window.pending == 1
    _until(lambda: log.recovery_point == 3, "the window's fsync")
    _until(lambda: window.pending == 0, "the log marked clean")
    assert window.flushes == 1
    append(log, batch(2))
    manager.dirtied(log)
    _until(lambda: log.recovery_point == 5, "the second window's fsync")
    assert window.flushes == 2


def test_a_topic_with_the_window_off_gets_no_deadline(manager: LogManager) -> None:
    manager.create_topic("never", 1, {"flush.ms": str(LONG_MAX)})
    log = _log(manager, "never")
    append(log, batch(1))
    manager.dirtied(log)
    assert manager.flush_window is not None and manager.flush_window.pending == 0
    assert log.recovery_point == 0


def test_logs_due_together_are_handed_over_in_one_wake(manager: LogManager) -> None:
    manager.create_topic("wide", 20, {})
    logs = [_log(manager, "wide", p) for p in range(20)]
    handed: list[Log] = []
    ready = threading.Event()
    now = [0.0]

    def submit(log: Log) -> None:
        handed.append(log)
        if len(handed) == len(logs):
            ready.set()

    window = FlushWindow(submit, clock=lambda: now[0])  # a clock of its own: every deadline is 0.05
    try:
        for log in logs:
            append(log, batch(1))
            window.dirtied(log)
        now[0] = 1.0  # all due at the thread's next look, whenever the machine lets it run
        assert ready.wait(WAIT_S), f"{len(handed)} of {len(logs)} logs handed over"
        assert window.rounds == 1 and window.flushes == len(logs) and window.pending == 0
        assert sorted(map(id, handed)) == sorted(map(id, logs))
    finally:
        window.close()


def test_a_failing_hand_over_does_not_stop_the_window(manager: LogManager) -> None:
    manager.create_topic("two", 2, {})
    first, second = _log(manager, "two", 0), _log(manager, "two", 1)
    handed: list[Log] = []

    def submit(log: Log) -> None:
        handed.append(log)
        if log is first:
            raise RuntimeError("a bug in one log's flush")

    window = FlushWindow(submit)
    try:
        for log in (first, second):
            append(log, batch(1))
            window.dirtied(log)
        _until(lambda: len(handed) == 2, "both logs handed over")
    finally:
        window.close()


def test_close_stops_the_thread_and_later_appends_get_no_deadline(tmp_path: Path) -> None:
    window = FlushWindow(lambda log: None)
    window.close()
    assert not window._thread.is_alive()
    log = open_log(tmp_path / "t-0", flush_interval_ms=10)
    try:
        window.dirtied(log)
        assert window.pending == 0
    finally:
        log.close()
