"""Group commit: futures resolve only after fsync, concurrent waiters share one fsync, failures reach them."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from unittest import mock

import pytest

from pybroker.storage.errors import FlushError
from pybroker.storage.flusher import Flusher
from tests.unit.storage.helpers import append, batch, open_log


def test_futures_resolve_only_after_fsync_and_waiters_share_rounds(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    gate = threading.Event()
    synced: list[int] = []
    events: list[str] = []
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        gate.wait(5)
        real_fsync(fd)
        synced.append(fd)
        events.append("fsync")

    with mock.patch("os.fsync", slow_fsync):
        append(log, batch(2))
        first = flusher.request(log, 2)
        first.add_done_callback(lambda _: events.append("resolved"))
        futures = [flusher.request(log, append(log, batch(1)).last_offset + 1) for _ in range(20)]
        assert not first.done() and not any(f.done() for f in futures)
        assert log.recovery_point == 0
        gate.set()
        assert first.result(5) >= 2
        assert all(f.result(5) >= 3 for f in futures)
    assert events.index("fsync") < events.index("resolved")
    assert log.recovery_point == log.log_end_offset == 22
    log_fd = log.active_segment.file.fileno()
    assert synced.count(log_fd) <= 2  # 21 waiters, at most two rounds
    flusher.close()
    log.close()


def test_already_durable_offsets_resolve_at_once(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    append(log, batch(2))
    log.flush()
    with mock.patch("os.fsync", side_effect=AssertionError("no fsync needed")):
        assert flusher.request(log, 2).result(1) == 2
    with pytest.raises(FlushError):
        flusher.request(log, 99).result(1)  # beyond the log end: can never be met
    flusher.close()
    log.close()


def test_a_failed_fsync_fails_its_waiters(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    append(log, batch(2))
    with mock.patch("os.fsync", side_effect=OSError(5, "Input/output error")):
        future = flusher.request(log, 2)
        with pytest.raises(OSError):
            future.result(5)
    assert log.recovery_point == 0
    assert flusher.request(log, 2).result(5) == 2  # the next round tries again
    flusher.close()
    log.close()


def test_close_drains_then_refuses(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    append(log, batch(2))
    pending = flusher.request(log, 2)
    cancelled = flusher.request(log, 1)
    cancelled.cancel()
    flusher.close()
    assert pending.result(0) == 2
    append(log, batch(1))
    with pytest.raises(FlushError):
        flusher.request(log, 3).result(1)
    log.close()


def test_flushes_racing_appends_and_rolls_never_claim_unwritten_data(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=600)
    written_at_fsync: list[int] = []
    claimed: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        written_at_fsync.append(log.log_end_offset)  # everything below this is written already
        real_fsync(fd)

    def keep_flushing() -> None:
        try:
            while not stop.is_set():
                before = len(written_at_fsync)
                point = log.flush()
                if len(written_at_fsync) > before:
                    claimed.append(point)
                    assert point <= written_at_fsync[before]
        except BaseException as exc:
            errors.append(exc)

    with mock.patch("os.fsync", recording_fsync):
        thread = threading.Thread(target=keep_flushing)
        thread.start()
        for _ in range(200):
            append(log, batch(2))
        stop.set()
        thread.join(10)
    assert not errors and claimed and len(log.segments) > 10
    assert log.flush() == log.log_end_offset == 400
    log.close()
