"""The cleaner manager: filthiest log first, lag rules, checkpoints, throttling, and loud failures."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pybroker.storage.checkpoints import read_checkpoint
from pybroker.storage.cleaner.checkpoint import CLEANER_OFFSET
from pybroker.storage.cleaner.cleaner import CleaningAborted
from pybroker.storage.cleaner.manager import CleanerManager, CleanerSettings
from pybroker.storage.cleaner.metrics import CLEANER_RUNS, DEAD_THREADS, UNCLEANABLE_PARTITIONS
from pybroker.storage.cleaner.selection import dirty_section
from pybroker.storage.cleaner.throttle import Throttler
from pybroker.storage.log import Log
from tests.unit.storage.cleaner import helpers
from tests.unit.storage.cleaner.helpers import (
    DAY_MS,
    NOW,
    Logs,
    append,
    cleaner,
    compact_config,
    records_of,
)

pytestmark = pytest.mark.usefixtures("cleaner_kind")  # each test: in-process, then worker process


@pytest.fixture
def logs(tmp_path: Path):  # type: ignore[no-untyped-def]
    source = Logs(tmp_path)
    yield source
    source.close()


def _manager(logs: Logs, *, process: bool | None = None, **kwargs: object) -> CleanerManager:
    if process is None:
        process = helpers.KIND["value"] == "process"
    settings = CleanerSettings(threads=1, dedupe_buffer_size=1 << 16, backoff_ms=10, process=process)
    manager = CleanerManager(logs, settings, clock_ms=lambda: logs.clock[0], **kwargs)  # type: ignore[arg-type]
    manager.checkpoints.__init__(logs.dirs)  # type: ignore[misc]
    return manager


def _fill(log: Log, versions: int, keys: int = 5, *, ts: int = NOW) -> None:
    for version in range(versions):
        for key in range(keys):
            append(log, [(b"k%d" % key, b"v%d" % version)], ts=ts)
        log.roll()


def test_the_filthiest_compacted_log_goes_first_and_others_wait_for_their_ratio(logs: Logs) -> None:
    dirtier = logs.add("dirtier", compact_config())
    _fill(dirtier, 6)
    less = logs.add("less", compact_config())
    _fill(less, 3)
    plain = logs.add("plain", compact_config(cleanup_policy="delete"))
    _fill(plain, 6)
    manager = _manager(logs)
    assert manager.grab_filthiest().log is dirtier  # type: ignore[union-attr]
    assert manager.grab_filthiest().log is less  # type: ignore[union-attr]  (the first is in progress)
    assert manager.grab_filthiest() is None  # delete-policy logs are never cleaned
    manager = _manager(logs)
    assert manager.clean_now() and manager.clean_now() and not manager.clean_now()
    assert len(records_of(dirtier)) == len(records_of(less)) == 5
    assert len(records_of(plain)) == 30
    # as many dirty bytes as clean ones: a ratio of one half is not above min.cleanable.dirty.ratio 0.5
    _fill(less, 1)
    section = dirty_section(less, manager.first_dirty_offset(less), NOW)
    assert section.ratio == 0.5 and not section.needs_cleaning(0.5) and section.needs_cleaning(0.49)
    assert manager.grab_filthiest() is None


def test_the_checkpoint_holds_the_first_dirty_offset_across_restarts(logs: Logs, tmp_path: Path) -> None:
    log = logs.add("t", compact_config())
    _fill(log, 4)
    manager = _manager(logs)
    assert manager.clean_now()
    assert read_checkpoint(tmp_path / CLEANER_OFFSET) == {("t", 0): log.active_segment.base_offset}
    assert manager.first_dirty_offset(log) == 20
    restarted = _manager(logs)
    assert restarted.first_dirty_offset(log) == 20
    assert not restarted.clean_now()  # nothing new is dirty


def test_min_compaction_lag_keeps_young_segments_and_max_lag_forces_a_clean(logs: Logs) -> None:
    young = logs.add("young", compact_config(min_compaction_lag_ms=DAY_MS))
    _fill(young, 4)
    assert _manager(logs).grab_filthiest() is None  # every segment is younger than a day
    logs.clock[0] = NOW + DAY_MS + 1
    assert _manager(logs).clean_now()
    assert len(records_of(young)) == 5

    overdue = logs.add("overdue", compact_config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1000))
    _fill(overdue, 2, ts=logs.clock[0])
    manager = _manager(logs)
    assert manager.clean_now()  # all dirty: a ratio of 1
    _fill(overdue, 1, ts=logs.clock[0])
    assert not manager.clean_now()  # a ratio of one half is below 0.99, and nothing waited 1 s yet
    assert len(records_of(overdue)) == 10
    logs.clock[0] += 2000
    assert manager.clean_now()
    assert len(records_of(overdue)) == 5


def test_tombstones_go_once_their_horizon_passes_even_with_nothing_else_dirty(logs: Logs) -> None:
    log = logs.add("t", compact_config(delete_retention_ms=1000))
    append(log, [(b"a", b"1"), (b"b", b"1")])
    append(log, [(b"a", None)])
    log.roll()
    manager = _manager(logs)
    assert manager.clean_now()
    assert [(r[1], r[2]) for r in records_of(log)] == [(b"b", b"1"), (b"a", None)]
    assert not manager.clean_now()
    logs.clock[0] += 1000
    assert manager.clean_now()
    assert [(r[1], r[2]) for r in records_of(log)] == [(b"b", b"1")]
    assert not manager.clean_now()


def _corrupt_a_batch(log: Log) -> None:
    path = log.segments[0].log_path
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # inside the last record: the CRC no longer matches
    path.write_bytes(bytes(data))


def test_a_failing_clean_marks_the_partition_uncleanable_loudly_and_others_go_on(logs: Logs, tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    broken = logs.add("broken", compact_config())
    _fill(broken, 6)
    healthy = logs.add("healthy", compact_config())
    _fill(healthy, 3)
    _corrupt_a_batch(broken)
    failed_before = CLEANER_RUNS.labels("failed")._value.get()
    manager = _manager(logs)
    assert manager.clean_now()  # the filthiest, the broken one, fails...
    assert list(manager.uncleanable()) == [("broken", 0)]
    assert "CRC" in manager.uncleanable()[("broken", 0)]
    assert CLEANER_RUNS.labels("failed")._value.get() == failed_before + 1
    assert UNCLEANABLE_PARTITIONS.labels(str(tmp_path))._value.get() == 1
    assert "marked uncleanable" in capsys.readouterr().out
    assert manager.clean_now()  # ...and is skipped: the healthy one is cleaned
    assert len(records_of(healthy)) == 5
    assert not manager.clean_now()
    assert not list(broken.dir.glob("*.cleaned"))
    # after a restart the partition is tried again (and fails again, loudly)
    restarted = _manager(logs)
    assert restarted.clean_now() and list(restarted.uncleanable()) == [("broken", 0)]


def test_an_io_error_goes_to_the_failure_channel_and_offline_dirs_are_not_cleaned(logs: Logs, tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    log = logs.add("t", compact_config())
    _fill(log, 4)
    errors: list[tuple[Path, OSError]] = []
    offline: set[Path] = set()
    manager = _manager(logs, process=False, on_io_error=lambda d, e: errors.append((d, e)), is_dir_online=lambda d: d not in offline)

    def broken_disk(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("pybroker.storage.cleaner.cleaned_segment.CleanedSegment.finish", broken_disk)
    assert manager.clean_now()
    assert [d for d, _ in errors] == [tmp_path] and errors[0][1].errno == 5
    monkeypatch.undo()
    offline.add(tmp_path)
    assert _manager(logs, is_dir_online=lambda d: d not in offline).grab_filthiest() is None


def test_a_dead_cleaner_thread_is_restarted_and_counted(logs: Logs, monkeypatch: pytest.MonkeyPatch) -> None:
    log = logs.add("t", compact_config())
    _fill(log, 4)
    manager = _manager(logs)
    real = manager.clean_once
    calls = {"n": 0}

    def flaky(cleaner):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug outside any one clean")
        return real(cleaner)

    monkeypatch.setattr(manager, "clean_once", flaky)
    dead_before = DEAD_THREADS._value.get()
    manager.settings = CleanerSettings(threads=1, dedupe_buffer_size=1 << 16, backoff_ms=10)
    manager._stop.clear()
    manager._threads = [manager._start_thread(0)]
    deadline = time.monotonic() + 10
    while manager._threads[0].is_alive() and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.01)
    assert manager.restart_dead_threads() == 1
    assert manager.dead_threads == 1 and DEAD_THREADS._value.get() == dead_before + 1
    while len(records_of(log)) != 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    manager.shutdown()
    assert len(records_of(log)) == 5
    assert not any(t.name.startswith("log-cleaner") for t in threading.enumerate())


def test_shutdown_interrupts_a_clean_and_leaves_no_output(logs: Logs) -> None:
    log = logs.add("t", compact_config())
    _fill(log, 4)
    before = records_of(log)
    stopping = cleaner(should_stop=lambda: True)
    with pytest.raises(CleaningAborted):
        stopping.clean(log, 0, log.active_segment.base_offset, NOW)
    assert records_of(log) == before
    assert not [p for p in log.dir.iterdir() if ".cleaned" in p.name or ".swap" in p.name]


def test_the_throttle_sleeps_the_cleaner_down_to_its_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttle = Throttler(1000.0, clock=lambda: now[0], sleep=sleep, check_interval_s=0.1)
    for i in range(10):
        now[0] = (i + 1) / 100
        throttle.maybe_throttle(100)  # 10 x 100 bytes in 0.1 s: 10 kB/s, ten times the limit
    assert slept and sum(slept) == pytest.approx(0.9)
    assert not Throttler(1e308).enabled
