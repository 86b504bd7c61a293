"""The clean in a worker process: what a kill -9, a shutdown, a stuck worker, a failing disk or a worker
that cannot start leave behind (the clean itself is checked on both paths by the other modules here)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from pybroker.storage.cleaner import process_cleaner
from pybroker.storage.cleaner.channel import Channel
from pybroker.storage.cleaner.job import WorkerSettings
from pybroker.storage.cleaner.manager import CleanerManager, CleanerSettings
from pybroker.storage.cleaner.metrics import CLEANER_RUNS, WORKER_DEATHS
from pybroker.storage.cleaner.process_cleaner import ProcessCleaner, WorkerProcess
from pybroker.storage.log import Log
from tests.unit.storage.cleaner.helpers import (
    Logs,
    Seen,
    append,
    compact_config,
    expected_after_clean,
    open_log,
    records_of,
)

KEYS = 50


@pytest.fixture
def logs(tmp_path: Path):  # type: ignore[no-untyped-def]
    source = Logs(tmp_path)
    yield source
    source.close()


def _manager(logs: Logs, **kwargs: object) -> CleanerManager:
    settings = CleanerSettings(threads=1, dedupe_buffer_size=1 << 20, backoff_ms=60_000, process=True,
                               process_nice=0)
    manager = CleanerManager(logs, settings, clock_ms=lambda: logs.clock[0], **kwargs)  # type: ignore[arg-type]
    manager.checkpoints.__init__(logs.dirs)  # type: ignore[misc]
    return manager


def _big_log(logs: Logs, segments: int = 30) -> Log:
    """`segments` full segments of 50 keys rewritten over and over (each its own group), then an active one."""
    log = logs.add("t", compact_config(segment_bytes=64 << 10))
    value = b"v" * 200
    version = 0
    while len(log.segments) <= segments:
        append(log, [(b"k%03d" % k, value + b"%d" % version) for k in range(KEYS)])
        version += 1
    append(log, [(b"active", b"x")])
    return log


def _cleaned_files(log: Log) -> list[str]:
    return sorted(p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap")))


def _check_consistent(log: Log, before: list[Seen]) -> None:
    """Nothing lost, repeated or changed: every latest value is still there, whatever was swapped."""
    now = records_of(log)
    offsets = [r[0] for r in now]
    assert offsets == sorted(set(offsets))
    original = {r[0]: r for r in before}
    assert all(original[r[0]] == r for r in now)
    for latest in expected_after_clean(before, log.active_segment.base_offset):
        assert latest in now


def _children() -> set[int]:
    """This process's children (the cleaner threads' workers among them), from /proc."""
    return {int(pid) for path in Path(f"/proc/{os.getpid()}/task").glob("*/children")
            for pid in path.read_text().split()}


def _kill_when_writing(cleaner: ProcessCleaner, log: Log, killed: list[int]) -> threading.Thread:
    """A thread that kill -9s the worker as soon as a `.cleaned` file shows it mid-clean."""

    def watch() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pid = cleaner.worker_pid
            if pid is not None and any(p.name.endswith(".log.cleaned") for p in log.dir.iterdir()):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.0005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_worker_killed_mid_clean_leaves_a_right_log_and_the_clean_is_retried(
        logs: Logs, capsys: pytest.CaptureFixture[str]) -> None:
    log = _big_log(logs)
    before = records_of(log)
    manager = _manager(logs)
    cleaner = manager.new_cleaner()
    assert isinstance(cleaner, ProcessCleaner)
    try:
        killed: list[int] = []
        deaths = WORKER_DEATHS._value.get()
        watcher = _kill_when_writing(cleaner, log, killed)
        assert manager.clean_once(cleaner)
        watcher.join()
        assert killed, "the worker was never seen writing"
        assert WORKER_DEATHS._value.get() == deaths + 1
        out = capsys.readouterr().out
        assert "cleaner worker died; the clean will be retried" in out and "Traceback" not in out
        assert _cleaned_files(log) == []
        assert manager.first_dirty_offset(log) is None  # the checkpoint did not move
        assert manager.uncleanable() == {}
        _check_consistent(log, before)
        # the files as a restart would find them are as right
        copy = shutil.copytree(log.dir, logs.root / "copy" / "t-0")
        reopened = open_log(copy, clean=False, segment_bytes=64 << 10)
        try:
            assert records_of(reopened) == records_of(log)
        finally:
            reopened.close()
        # retried after the backoff, by a new worker, and this time finished
        assert manager.grab_filthiest() is None
        logs.clock[0] += 60_000
        assert manager.clean_once(cleaner)
        assert cleaner.worker_pid not in (None, killed[0])
        assert records_of(log) == expected_after_clean(before, log.active_segment.base_offset)
        assert manager.first_dirty_offset(log) == log.active_segment.base_offset
    finally:
        cleaner.close()


def test_a_partition_that_kills_the_worker_again_and_again_is_marked_uncleanable(
        logs: Logs, capsys: pytest.CaptureFixture[str]) -> None:
    log = _big_log(logs, segments=12)
    manager = _manager(logs)
    cleaner = manager.new_cleaner()
    assert isinstance(cleaner, ProcessCleaner)
    try:
        for _ in range(3):
            killed: list[int] = []
            watcher = _kill_when_writing(cleaner, log, killed)
            assert manager.clean_once(cleaner)
            watcher.join()
            assert killed
            logs.clock[0] += 60_000  # the backoff passed: the partition is tried again (its checkpoint never moved)
        assert list(manager.uncleanable()) == [("t", 0)]
        assert "3 times in a row" in capsys.readouterr().out
    finally:
        cleaner.close()


def test_shutdown_during_a_clean_stops_the_worker_and_leaves_no_output(logs: Logs) -> None:
    log = _big_log(logs, segments=60)
    before = records_of(log)
    manager = _manager(logs)
    manager.settings = CleanerSettings(threads=1, dedupe_buffer_size=1 << 20, backoff_ms=60_000, process=True,
                                       process_nice=0, io_max_bytes_per_second=1e6)  # a slow clean: seconds
    manager.throttler.bytes_per_second = 1e6  # from its first output to its end
    ours = _children()
    aborted_before = CLEANER_RUNS.labels("aborted")._value.get()
    manager.startup()
    deadline = time.monotonic() + 60
    while not any(p.name.endswith(".cleaned") for p in log.dir.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.005)
    workers = _children() - ours
    assert workers, "no worker process was cleaning"
    started = time.monotonic()
    manager.shutdown()
    # the clean was cut short, not waited for (its count says so, whatever the machine's load); the time
    # only guards against a shutdown that hangs: the worker's grace to unwind, and slack for a busy machine
    assert CLEANER_RUNS.labels("aborted")._value.get() == aborted_before + 1, "the clean was not stopped"
    assert time.monotonic() - started < process_cleaner.STOP_GRACE_S + 25
    assert not any(t.name.startswith("log-cleaner") for t in threading.enumerate())
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists(), "the worker outlived the shutdown"
    assert _cleaned_files(log) == []
    _check_consistent(log, before)


def test_a_stuck_worker_is_killed_at_shutdown(logs: Logs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_cleaner, "STOP_GRACE_S", 0.5)
    log = _big_log(logs, segments=30)
    before = records_of(log)
    stop = threading.Event()
    slow = WorkerSettings(1 << 20, 0.9, 1e6, 1 << 16)  # throttled to ~2 s: still busy when frozen
    cleaner = ProcessCleaner(lambda: slow, nice=0, should_stop=stop.is_set)
    try:
        frozen: list[int] = []

        def freeze() -> None:  # SIGSTOP the worker as soon as it has started, then ask for a stop
            while cleaner.worker_pid is None:
                time.sleep(0.001)
            os.kill(cleaner.worker_pid, signal.SIGSTOP)
            frozen.append(cleaner.worker_pid)
            stop.set()

        threading.Thread(target=freeze, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(process_cleaner.CleaningAborted, match="worker killed"):
            cleaner.clean(log, 0, log.active_segment.base_offset, logs.clock[0])
        assert time.monotonic() - started < 30  # killed after the grace, not waited for (slack for a busy machine)
        assert frozen and not Path(f"/proc/{frozen[0]}").exists()
        assert _cleaned_files(log) == []
        _check_consistent(log, before)
    finally:
        cleaner.close()


def test_an_io_error_in_the_worker_goes_to_the_failure_channel(logs: Logs) -> None:
    log = _big_log(logs, segments=3)
    blocker = log.dir / f"{log.segments[0].base_offset:020d}.log.cleaned"
    blocker.mkdir()  # the worker cannot replace it with its output: EISDIR, even for root
    errors: list[tuple[Path, OSError]] = []
    manager = _manager(logs, on_io_error=lambda d, e: errors.append((d, e)))
    assert manager.clean_now()
    assert [d for d, _ in errors] == [logs.root] and isinstance(errors[0][1], IsADirectoryError)
    assert list(manager.uncleanable()) == [("t", 0)]


def test_the_clean_runs_on_the_thread_when_the_worker_cannot_start(
        logs: Logs, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(process_cleaner, "WORKER_MODULE", "pybroker.storage.cleaner.no_such_worker")
    log = _big_log(logs, segments=3)
    before = records_of(log)
    assert _manager(logs).clean_now()
    assert "cleaner worker process unavailable; cleaning on a broker thread" in capsys.readouterr().out
    assert records_of(log) == expected_after_clean(before, log.active_segment.base_offset)


def test_the_offset_map_lives_in_the_worker(logs: Logs, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_map_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("an offset map in the broker's process")

    monkeypatch.setattr("pybroker.storage.cleaner.offset_map.OffsetMap.__init__", no_map_here)
    log = _big_log(logs, segments=3)
    before = records_of(log)
    assert _manager(logs).clean_now()
    assert records_of(log) == expected_after_clean(before, log.active_segment.base_offset)


def test_the_worker_runs_nicer_and_exits_when_the_broker_goes() -> None:
    worker = WorkerProcess(nice=5)
    try:
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, worker.pid) == min(ours + 5, 19)
        assert worker.proc.stdin is not None
        worker.proc.stdin.close()  # what the worker sees when the broker dies
        assert worker.proc.wait(60) == 0  # at once; the time only guards against a hang (slack for a busy machine)
    finally:
        worker.kill()


def test_the_pipe_works_past_fd_setsize() -> None:
    """A broker with thousands of segment files open hands the pipe descriptors above 1024 (select's limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 2000:
        pytest.skip(f"RLIMIT_NOFILE is {soft}")
    read_end, write_end = os.pipe()
    high_read, high_write = os.dup2(read_end, 1990), os.dup2(write_end, 1991)
    os.close(read_end)
    os.close(write_end)
    try:
        channel = Channel(high_read, high_write)
        assert not channel.readable(0)
        channel.send("stop")
        assert channel.readable(1) and channel.receive() == ("stop",)
    finally:
        os.close(high_read)
        os.close(high_write)
