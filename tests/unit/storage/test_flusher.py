"""Group commit: futures resolve only after fsync, concurrent waiters share one fsync, failures reach them."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from pybroker.storage.errors import FlushError
from pybroker.storage.flusher import Flusher
from tests.unit.storage.helpers import append, batch, open_log


def _flushed(flusher: Flusher, log: Any, offset: int) -> asyncio.Future[int]:
    """A loop future answered by `Flusher.notify` (the broker's partition layer waits the same way), built here
    so storage tests stay in storage."""
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def settle(outcome: int | BaseException) -> None:
        if not future.done():
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    flusher.notify(log, offset, settle, asyncio.get_running_loop())
    return future


def test_futures_resolve_only_after_fsync_and_waiters_share_rounds(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    gate = threading.Event()
    synced: list[int] = []
    events: list[str] = []
    real_fsync = os.fdatasync

    def slow_fsync(fd: int) -> None:
        gate.wait(5)
        real_fsync(fd)
        synced.append(fd)
        events.append("fsync")

    with mock.patch("os.fdatasync", slow_fsync):
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
    with mock.patch("os.fdatasync", side_effect=AssertionError("no fsync needed")):
        assert flusher.request(log, 2).result(1) == 2
    with pytest.raises(FlushError):
        flusher.request(log, 99).result(1)  # beyond the log end: can never be met
    flusher.close()
    log.close()


def test_a_failed_fsync_fails_its_waiters(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    append(log, batch(2))
    with mock.patch("os.fdatasync", side_effect=OSError(5, "Input/output error")):
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
    real_fsync = os.fdatasync

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

    with mock.patch("os.fdatasync", recording_fsync):
        thread = threading.Thread(target=keep_flushing)
        thread.start()
        for _ in range(200):
            append(log, batch(2))
        stop.set()
        thread.join(10)
    assert not errors and claimed and len(log.segments) > 10
    assert log.flush() == log.log_end_offset == 400
    log.close()


async def test_loop_waiters_resolve_only_after_their_own_logs_sync(tmp_path: Path) -> None:
    """A round's waiters are answered once *their* log is synced: a slow log holds back only its own."""
    slow, fast = open_log(tmp_path / "slow-0"), open_log(tmp_path / "fast-0")
    flusher = Flusher("test")
    gate = threading.Event()
    synced: list[int] = []
    real_fdatasync = os.fdatasync

    def gated_fdatasync(fd: int) -> None:
        if fd == slow.active_segment.file.fileno():
            gate.wait(5)
        real_fdatasync(fd)
        synced.append(fd)

    with mock.patch("os.fdatasync", gated_fdatasync):
        append(slow, batch(2))
        append(fast, batch(3))
        slow_done = _flushed(flusher, slow, 2)
        fast_done = _flushed(flusher, fast, 3)
        assert await asyncio.wait_for(fast_done, 5) == 3
        assert not slow_done.done() and slow.recovery_point == 0
        assert synced == [fast.active_segment.file.fileno()]
        gate.set()
        assert await asyncio.wait_for(slow_done, 5) == 2
        assert synced[-1] == slow.active_segment.file.fileno()
    flusher.close()
    slow.close()
    fast.close()


async def test_a_rounds_loop_waiters_cost_one_loop_wake(tmp_path: Path) -> None:
    """Hundreds of acks=all waiters of one round are answered by one callback, not one per future."""
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    gate = threading.Event()
    real_fdatasync = os.fdatasync
    loop = asyncio.get_running_loop()
    wakes: list[object] = []
    real_call_soon_threadsafe = loop.call_soon_threadsafe

    def counting(callback: Any, *args: Any) -> Any:
        wakes.append(callback)
        return real_call_soon_threadsafe(callback, *args)

    def gated_fdatasync(fd: int) -> None:
        gate.wait(5)
        real_fdatasync(fd)

    with mock.patch("os.fdatasync", gated_fdatasync), mock.patch.object(loop, "call_soon_threadsafe", counting):
        append(log, batch(1))
        first = _flushed(flusher, log, 1)  # the first round, held at its fsync
        offsets = [append(log, batch(1)).last_offset + 1 for _ in range(300)]
        waiters = [_flushed(flusher, log, offset) for offset in offsets]
        gate.set()
        assert await asyncio.wait_for(first, 5) >= 1
        points = await asyncio.wait_for(asyncio.gather(*waiters), 5)
        assert all(point >= offset for point, offset in zip(points, offsets, strict=True))
    assert len(wakes) <= 2  # the first round's answer and the second round's 300 answers
    flusher.close()
    log.close()


def test_many_logs_are_synced_at_once(tmp_path: Path) -> None:
    """Logs do not wait for each other's fsync: four syncs must be in flight together to pass the barrier."""
    logs = [open_log(tmp_path / f"t-{i}") for i in range(4)]
    flusher = Flusher("test", workers=4)
    barrier = threading.Barrier(4, timeout=5)
    real_fdatasync = os.fdatasync

    def meeting_fdatasync(fd: int) -> None:
        barrier.wait()  # raises BrokenBarrierError if the syncs ran one after another
        real_fdatasync(fd)

    with mock.patch("os.fdatasync", meeting_fdatasync):
        futures = [flusher.request(log, append(log, batch(1)).last_offset + 1) for log in logs]
        assert [f.result(10) for f in futures] == [1, 1, 1, 1]
    flusher.close()
    for log in logs:
        log.close()


async def test_logs_readied_in_one_loop_iteration_cost_the_loop_one_wake_and_still_sync_at_once(
        tmp_path: Path) -> None:
    """acks=all over many partitions readies one log per request: the loop wakes one worker for all the
    logs its callbacks readied, and the workers wake each other, so the four fsyncs still meet at the
    barrier (in flight together) while the loop thread signalled the workers once, not four times."""
    logs = [open_log(tmp_path / f"t-{i}") for i in range(4)]
    flusher = Flusher("test", workers=4)
    barrier = threading.Barrier(4, timeout=5)
    real_fdatasync = os.fdatasync
    loop_thread = threading.get_ident()
    from_loop: list[int] = []
    real_notify = flusher._cond.notify

    def counting_notify(n: int = 1) -> None:
        if threading.get_ident() == loop_thread:
            from_loop.append(n)
        real_notify(n)

    def meeting_fdatasync(fd: int) -> None:
        barrier.wait()  # raises BrokenBarrierError unless all four syncs are in flight at once
        real_fdatasync(fd)

    for _ in range(500):  # every worker asleep first, as between requests under load
        if flusher._sleeping == 4:
            break
        await asyncio.sleep(0.01)
    with mock.patch("os.fdatasync", meeting_fdatasync), mock.patch.object(flusher._cond, "notify", counting_notify):
        waiters = [_flushed(flusher, log, append(log, batch(1)).last_offset + 1) for log in logs]
        assert await asyncio.wait_for(asyncio.gather(*waiters), 10) == [1, 1, 1, 1]
    assert from_loop == [1]
    flusher.close()
    for log in logs:
        log.close()


async def test_a_cancelled_loop_waiter_is_skipped_and_a_closed_flusher_refuses(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    flusher = Flusher("test")
    append(log, batch(2))
    cancelled = _flushed(flusher, log, 1)
    cancelled.cancel()
    assert await asyncio.wait_for(_flushed(flusher, log, 2), 5) == 2
    assert await _flushed(flusher, log, 2) == 2  # already durable: answered at once
    flusher.close()
    append(log, batch(1))
    with pytest.raises(FlushError):
        await _flushed(flusher, log, 3)
    log.close()
