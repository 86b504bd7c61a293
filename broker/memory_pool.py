"""The broker-wide budget of request bytes held in memory: Kafka's `queued.max.request.bytes`.

A connection asks for a frame's bytes as soon as the frame's size prefix is read, before anything is
allocated, and gives them back once the request has been handled (or the connection is gone). A frame
that does not fit is held back and its connection stops reading (Kafka mutes the channel) until memory
is released; waiting connections are served first come, first served, so a stream of newcomers cannot
starve one that waits for a big frame.

Two rules keep a saturated pool from stopping everyone:
- small frames (up to `SMALL_FRAME_BYTES`: metadata, heartbeats, offset commits, fetch requests, small
  produces) are always admitted and only counted. Their total is bounded by the number of connections
  times that size, since a connection holds at most one partly received frame and stops reading while
  a request of its is still working;
- a frame larger than the whole budget is admitted when no other large frame is held, so a request up
  to `socket.request.max.bytes` is always served eventually, and the pool overshoots by one frame at most.
What frees a pool held by clients that stop sending mid-frame is the connection's stall and idle
timeouts (`connections.max.idle.ms`), which close it and release its bytes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

#: frames up to this size never wait for the pool
SMALL_FRAME_BYTES = 64 * 1024


class MemoryPool:
    __slots__ = ("_schedule", "_waiters", "capacity", "large_used", "used")

    def __init__(self, capacity: int, schedule: Callable[[Callable[[], None]], object] | None = None) -> None:
        #: bytes the pool may hand out; negative means unbounded (Kafka's -1)
        self.capacity = capacity
        self.used = 0  # every admitted byte, small frames included
        self.large_used = 0  # bytes of frames above SMALL_FRAME_BYTES
        #: connections waiting for memory, oldest first: key -> (frame size, callback to call when it fits)
        self._waiters: OrderedDict[object, tuple[int, Callable[[], None]]] = OrderedDict()
        # how a wake-up runs: on the event loop later, never inside the caller's own release
        self._schedule = schedule or (lambda fn: fn())

    @property
    def waiting(self) -> int:
        """Connections paused until memory is released."""
        return len(self._waiters)

    def _fits(self, size: int) -> bool:
        return self.capacity < 0 or self.used + size <= self.capacity or self.large_used == 0

    def try_allocate(self, size: int, waiter: object, wake: Callable[[], None]) -> bool:
        """Charge `size` bytes, or queue `waiter` (whose `wake` is called when it may fit) and say no."""
        if size <= SMALL_FRAME_BYTES:
            self.used += size
            return True
        head = next(iter(self._waiters), waiter)
        if head is waiter and self._fits(size):
            self._waiters.pop(waiter, None)
            self.used += size
            self.large_used += size
            self._wake_head()  # the next in line may fit as well
            return True
        self._waiters.setdefault(waiter, (size, wake))
        return False

    def release(self, size: int) -> None:
        if size <= 0:
            return
        self.used -= size
        if size > SMALL_FRAME_BYTES:
            self.large_used -= size
        self._wake_head()

    def release_held(self, small: int, large: int) -> None:
        """Give back what a closed connection still held: `small` bytes of small frames, `large` of large."""
        self.used -= small + large
        self.large_used -= large
        self._wake_head()

    def forget(self, waiter: object) -> None:
        """A waiting connection closed: take it out of the line (and let the next one try)."""
        if self._waiters.pop(waiter, None) is not None:
            self._wake_head()

    def _wake_head(self) -> None:
        if self._waiters:
            size, wake = next(iter(self._waiters.values()))
            if self._fits(size):
                self._schedule(wake)
