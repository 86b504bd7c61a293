"""The request memory pool: small frames always pass, large ones wait in line, nothing waits forever."""

from __future__ import annotations

from collections.abc import Callable

from pybroker.broker.memory_pool import SMALL_FRAME_BYTES, MemoryPool

BIG = SMALL_FRAME_BYTES + 1


def _pool(capacity: int) -> tuple[MemoryPool, list[Callable[[], None]]]:
    woken: list[Callable[[], None]] = []
    return MemoryPool(capacity, schedule=woken.append), woken


def test_small_frames_are_always_admitted_even_over_capacity() -> None:
    pool, _ = _pool(10 * BIG)
    assert pool.try_allocate(10 * BIG, "hog", lambda: None)
    for i in range(100):
        assert pool.try_allocate(SMALL_FRAME_BYTES, i, lambda: None)
    assert pool.used == 10 * BIG + 100 * SMALL_FRAME_BYTES and pool.waiting == 0


def test_large_frames_wait_first_come_first_served_and_are_woken_when_they_fit() -> None:
    pool, woken = _pool(3 * BIG)
    assert pool.try_allocate(2 * BIG, "a", lambda: None)
    wake_b, wake_c = (lambda: None), (lambda: None)
    assert not pool.try_allocate(2 * BIG, "b", wake_b)
    assert pool.try_allocate(BIG, "c", wake_c) is False  # fits, but b is first in line
    assert pool.waiting == 2
    pool.release(2 * BIG)
    assert woken == [wake_b]
    assert not pool.try_allocate(BIG, "c", wake_c)  # still b's turn
    assert pool.try_allocate(2 * BIG, "b", wake_b)
    assert woken == [wake_b, wake_c]  # c fits beside b: woken at once
    assert pool.try_allocate(BIG, "c", wake_c)
    assert pool.used == 3 * BIG and pool.waiting == 0


def test_a_frame_larger_than_the_pool_passes_when_no_large_frame_is_held() -> None:
    pool, woken = _pool(BIG)
    assert pool.try_allocate(SMALL_FRAME_BYTES, "s", lambda: None)
    assert pool.try_allocate(5 * BIG, "huge", lambda: None)  # only small ones held
    assert not pool.try_allocate(5 * BIG, "next", lambda: None)
    pool.release(5 * BIG)
    assert len(woken) == 1 and pool.try_allocate(5 * BIG, "next", lambda: None)


def test_a_closed_waiter_leaves_the_line_and_a_closed_holder_gives_back_everything() -> None:
    pool, woken = _pool(2 * BIG)
    assert pool.try_allocate(2 * BIG, "holder", lambda: None)
    assert not pool.try_allocate(2 * BIG, "gone", lambda: None)
    wake = lambda: None  # noqa: E731
    assert not pool.try_allocate(BIG, "next", wake)
    pool.forget("gone")
    assert pool.waiting == 1
    pool.release_held(small=0, large=2 * BIG)
    assert woken[-1] is wake and pool.used == 0 and pool.large_used == 0


def test_unbounded_pool() -> None:
    pool, _ = _pool(-1)
    assert all(pool.try_allocate(100 * BIG, i, lambda: None) for i in range(10))
