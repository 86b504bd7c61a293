"""Moving a partition between log dirs (`storage.log_mover`): the copy, the swap, what follows the log
(offsets, log start, producer state, aborted transactions, checkpoints), the refusals, and appends that
go on during the move."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pybroker.protocol.records.batch import iter_batches
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.checkpoints import LOG_START_OFFSET, RECOVERY_POINT, read_checkpoint
from pybroker.storage.errors import LogDirNotFoundError, LogDirOfflineError, UnknownTopicError
from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_manager import LogManager
from tests.unit.storage.helpers import NOW, append, batch

SMALL_SEGMENTS = {"segment.bytes": "6000"}


def _config(overrides: dict[str, str]) -> LogConfig:
    return LogConfig(segment_bytes=int(overrides.get("segment.bytes", 1 << 30)))


def manager_of(dirs: list[Path]) -> LogManager:
    manager = LogManager(dirs, node_id=1, log_config_for=_config, clock_ms=lambda: NOW)
    manager.startup()
    return manager


def wait_moved(manager: LogManager, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while manager.moves.busy:
        assert time.monotonic() < deadline, "the move did not finish"
        time.sleep(0.01)


def values(log: Log) -> list[tuple[int, bytes]]:
    """(offset, value) of every record from the log start."""
    found: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while True:
        region = log.read(offset, 1 << 20).region
        if region is None:
            return found
        data = region.read_bytes()
        for pos, header in iter_batches(data):
            found.extend((header.base_offset + r.offset_delta, r.value or b"") for r in decode_records(data, pos, header)
                         if not header.is_control)
            offset = header.last_offset + 1


def other(manager: LogManager, topic: str = "t", partition: int = 0) -> Path:
    current = manager.dir_of(topic, partition)
    return next(d for d in manager.dirs if d != current)


def test_a_move_copies_everything_and_swaps_the_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = manager_of(dirs)
    manager.create_topic("t", 1, SMALL_SEGMENTS)
    log = manager.get_log("t", 0)
    assert log is not None
    for i in range(30):
        append(log, batch(3, value=b"r%d-" % i + b"p" * 300))
    before = values(log)
    source, target = manager.dir_of("t", 0), other(manager)
    manager.moves.move("t", 0, str(target))
    wait_moved(manager)
    moved = manager.get_log("t", 0)
    assert moved is not None and moved is not log and log.closed
    assert manager.dir_of("t", 0) == target and moved.dir == target / "t-0"
    assert values(moved) == before and moved.log_end_offset == 90 and len(moved.segments) > 1
    assert not (source / "t-0").exists() and not [p for p in source.iterdir() if p.name.startswith("t-0")]
    assert not [p for p in target.iterdir() if "future" in p.name]
    assert read_checkpoint(target / RECOVERY_POINT)[("t", 0)] == 90
    append(moved, batch(2))  # the moved log takes appends
    manager.shutdown()
    again = manager_of(dirs)
    reopened = again.get_log("t", 0)
    assert reopened is not None and again.dir_of("t", 0) == target and reopened.log_end_offset == 92
    again.shutdown()


def test_appends_during_the_move_all_arrive_exactly_once(tmp_path: Path) -> None:
    manager = manager_of([tmp_path / "a", tmp_path / "b"])
    manager.create_topic("t", 1, SMALL_SEGMENTS)
    first = manager.get_log("t", 0)
    assert first is not None
    for i in range(200):
        append(first, batch(1, value=b"x%d" % i))
    manager.moves.chunk_bytes = 2048  # many rounds of copying while the appends go on
    written: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            log = manager.get_log("t", 0)
            assert log is not None
            value = b"y%d" % i
            try:
                append(log, batch(1, value=value))
            except Exception:  # the old log after the swap: the producer asks again
                continue
            written.append(value)
            i += 1
            # a paced producer: one appending flat out on a busy machine can outrun a copy of 2 KB
            # chunks for ever (as a Kafka future replica never catches up with a faster leader)
            time.sleep(0.001)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        manager.moves.move("t", 0, str(other(manager)))
        wait_moved(manager)
        time.sleep(0.05)
    finally:
        stop.set()
        producer.join()
    moved = manager.get_log("t", 0)
    assert moved is not None and moved is not first
    got = [value for _, value in values(moved)]
    assert got == [b"x%d0" % i for i in range(200)] + [w + b"0" for w in written]
    assert len(written) > 0
    manager.shutdown()


def test_log_start_producer_state_and_aborted_transactions_follow_the_move(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = manager_of(dirs)
    manager.create_topic("t", 1, SMALL_SEGMENTS)
    log = manager.get_log("t", 0)
    assert log is not None
    for seq in range(0, 30, 3):
        append(log, batch(3, producer=(5, 0, seq)))  # an idempotent producer, offsets 0-29
    txn = bytearray(build_batch([Record(0, 0, b"k", b"aborted")], base_timestamp=NOW, producer_id=9,
                                producer_epoch=0, base_sequence=0, is_transactional=True))
    append(log, txn)  # 30
    log.append_marker(9, 0, 0, False, now_ms=NOW)  # 31: abort
    assert manager.delete_records("t", 0, 12) == 12
    manager.moves.move("t", 0, str(other(manager)))
    wait_moved(manager)
    moved = manager.get_log("t", 0)
    assert moved is not None
    assert moved.log_start_offset == 12 and moved.log_end_offset == 32
    assert moved.aborted_transactions(0, 32) == [(9, 30)]
    duplicate = append(moved, batch(3, producer=(5, 0, 27)))  # the last batch again: a duplicate
    assert duplicate.duplicate and duplicate.base_offset == 27
    target = manager.dir_of("t", 0)
    assert target is not None and read_checkpoint(target / LOG_START_OFFSET)[("t", 0)] == 12
    manager.shutdown()
    again = manager_of(dirs)
    reopened = again.get_log("t", 0)
    assert reopened is not None and reopened.log_start_offset == 12
    assert reopened.aborted_transactions(0, 32) == [(9, 30)]
    again.shutdown()


def test_refusals_and_no_ops(tmp_path: Path) -> None:
    manager = manager_of([tmp_path / "a", tmp_path / "b"])
    manager.create_topic("t", 1, {})
    current = manager.dir_of("t", 0)
    assert current is not None
    for path in [str(tmp_path / "elsewhere"), "b", str(tmp_path / "a" / ".." / "b" / "x"), ""]:
        with pytest.raises(LogDirNotFoundError):
            manager.moves.move("t", 0, path)
    with pytest.raises(UnknownTopicError):
        manager.moves.move("t", 1, str(current))
    with pytest.raises(UnknownTopicError):
        manager.moves.move("nope", 0, str(current))
    manager.moves.move("t", 0, str(current))  # already there: nothing to do
    assert manager.moves.futures() == []
    target = other(manager)
    manager.failures.report(target, OSError(5, "EIO"))
    with pytest.raises(LogDirOfflineError):
        manager.moves.move("t", 0, str(target))
    manager.shutdown()


def test_a_second_request_replaces_the_running_move_and_moving_back_cancels_it(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    manager = manager_of(dirs)
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    append(log, batch(3))
    current = manager.dir_of("t", 0)
    assert current is not None
    gate = threading.Event()
    original = manager.moves._copy_then_swap

    def held(*args: object) -> bool:
        gate.wait(10)
        return original(*args)

    manager.moves._copy_then_swap = held
    targets = [d for d in dirs if d != current]
    manager.moves.move("t", 0, str(targets[0]))
    manager.moves.move("t", 0, str(targets[0]))  # the same again: still one move
    assert [f.log_dir for f in manager.moves.futures()] == [targets[0]]
    manager.moves.move("t", 0, str(targets[1]))  # Kafka's rule: the newest target wins
    assert [f.log_dir for f in manager.moves.futures()] == [targets[1]]
    manager.moves.move("t", 0, str(current))  # back where it is: the move is dropped
    assert manager.moves.futures() == []
    for i in range(1000):  # a client flipping the target: at most one move per partition waits
        manager.moves.move("t", 0, str(targets[i % 2]))
    assert len(manager.moves._queue) == 1 and len(manager.moves.futures()) == 1
    manager.moves.move("t", 0, str(current))
    assert manager.moves._queue == {} and manager.moves.futures() == []
    gate.set()
    time.sleep(0.2)
    assert manager.dir_of("t", 0) == current and manager.get_log("t", 0) is log
    assert not [p for d in dirs for p in d.iterdir() if p.name.endswith("-future")]
    manager.shutdown()


def test_shutdown_during_a_move_keeps_the_partition_whole(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = manager_of(dirs)
    manager.create_topic("t", 1, SMALL_SEGMENTS)
    log = manager.get_log("t", 0)
    assert log is not None
    for _ in range(50):
        append(log, batch(3, value=b"v" * 1000))
    source = manager.dir_of("t", 0)
    manager.moves.throttler.bytes_per_second = 2000  # slow enough to be caught mid-copy
    manager.moves.chunk_bytes = 512
    manager.moves.move("t", 0, str(other(manager)))
    time.sleep(0.3)
    manager.shutdown()
    assert not [p for d in dirs for p in d.iterdir() if p.name.endswith("-future")]
    again = manager_of(dirs)
    reopened = again.get_log("t", 0)
    assert reopened is not None and again.dir_of("t", 0) == source and reopened.log_end_offset == 150
    again.shutdown()


def test_deleting_the_topic_during_a_move_leaves_nothing_behind(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = manager_of(dirs)
    manager.create_topic("t", 1, SMALL_SEGMENTS)
    log = manager.get_log("t", 0)
    assert log is not None
    for _ in range(50):
        append(log, batch(3, value=b"v" * 1000))
    manager.moves.throttler.bytes_per_second = 2000
    manager.moves.chunk_bytes = 512
    manager.moves.move("t", 0, str(other(manager)))
    time.sleep(0.2)
    manager.delete_topic("t")
    wait_moved(manager)
    time.sleep(0.2)
    assert manager.get_log("t", 0) is None
    assert not [p for d in dirs for p in d.iterdir() if p.name.startswith("t-0")]
    manager.shutdown()


def test_the_swap_waits_for_a_clean_of_the_partition_and_holds_the_cleaner_off(tmp_path: Path) -> None:
    from pybroker.storage.cleaner.manager import CleanerManager, CleanerSettings

    manager = manager_of([tmp_path / "a", tmp_path / "b"])
    cleaner = CleanerManager(manager, CleanerSettings(switch_interval_s=None))
    manager.moves.hold_cleaning = cleaner.held_off
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    append(log, batch(3))
    cleaner._in_progress.add(("t", 0))  # a clean of the partition is running
    target = other(manager)
    manager.moves.move("t", 0, str(target))
    time.sleep(0.3)
    assert manager.dir_of("t", 0) != target and manager.moves.futures()  # copied, waiting to swap
    cleaner._in_progress.discard(("t", 0))
    wait_moved(manager)
    assert manager.dir_of("t", 0) == target and ("t", 0) not in cleaner._in_progress
    manager.shutdown()


def test_a_target_dir_failing_during_the_copy_drops_the_move_and_keeps_the_partition(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = manager_of(dirs)
    manager.create_topic("t", 1, SMALL_SEGMENTS)
    log = manager.get_log("t", 0)
    assert log is not None
    for _ in range(50):
        append(log, batch(3, value=b"v" * 1000))
    source, target = manager.dir_of("t", 0), other(manager)
    manager.moves.throttler.bytes_per_second = 20_000
    manager.moves.chunk_bytes = 4096
    manager.moves.move("t", 0, str(target))
    time.sleep(0.3)
    manager.failures.report(target, OSError(5, "EIO"))  # the disk under the copy fails
    wait_moved(manager)
    assert manager.get_log("t", 0) is log and manager.dir_of("t", 0) == source and not log.closed
    append(log, batch(1))
    assert log.log_end_offset == 151 and manager.moves.completed == 0
    manager.shutdown()


def test_only_a_future_marked_complete_is_ever_promoted(tmp_path: Path) -> None:
    """A future without its completion mark is an unfinished copy even when no dir of its partition is
    left (say its log dir was dropped from the config): it is deleted, never served."""
    from pybroker.storage.log_mover import FUTURE_COMPLETE, FUTURE_OF, settle_future_dirs

    a, b = tmp_path / "a", tmp_path / "b"
    unfinished, complete = a / "t-0.0123456789abcdef0123456789abcdef-future", b / "u-1.fedcba9876543210fedcba9876543210-future"
    for path, marker, name in ((unfinished, FUTURE_OF, b"t-0"), (complete, FUTURE_COMPLETE, b"u-1")):
        path.mkdir(parents=True)
        (path / marker).write_bytes(name)
    verdicts = dict(settle_future_dirs([a, b], lambda name: name in ("t-0", "u-1")))
    assert verdicts == {str(unfinished): "dropped", str(complete): "promoted"}
    assert not unfinished.exists() and not (a / "t-0").exists()
    assert (b / "u-1").is_dir() and not (b / "u-1" / FUTURE_COMPLETE).exists()
