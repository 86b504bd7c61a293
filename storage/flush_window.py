"""The acks=1 window: data no acks=all producer waits on is fsynced within `flush.ms` of its first append.

On one node no replica covers an acks=1 (or acks=0) write, so without this a power cut loses everything
appended since the last fsync, however old. Kafka's `flush.ms` checks "time since the last flush" on a
scheduler tick; here the bound is exact: a log's deadline is set by the first append after its last
flush (the oldest unsynced byte), and the window flusher hands the log to its log dir's group-commit
`Flusher` at that deadline, which fsyncs it up to the log end at that moment. So every acknowledged
record is fsynced within the window plus the time of the fsync itself (and of any fsyncs queued before
it). Redpanda offers the same bound (100 ms by default there).

Why one thread and a heap, not a timer per partition: 10,000 partitions would be 10,000 timers on the
event loop, each a wake. Here the loop's cost per append is one set lookup (`dirtied`); only the first
append after a flush takes the lock and pushes a deadline, and it wakes the thread only when that
deadline is earlier than the one the thread already sleeps until (with one window for every topic, only
when nothing was pending). The thread sleeps until the earliest deadline, then takes every log due
within `COALESCE_S` more, so logs dirtied close together cost one wake and go to the flusher's workers
together, which fsync them in parallel and merge them with acks=all rounds of the same log (one fsync
covers both). A log is marked clean before it is handed over, so an append racing with the hand-over
either is covered by that fsync (it reads the log end later) or sets a new deadline.

Threads: `dirtied` from the event loop (or any thread); the flush runs on the window's own thread and
the flusher's workers; `close` from whoever shuts storage down.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from pybroker.storage.log import Log

log = structlog.get_logger("pybroker.storage.flush_window")

#: a window this long or longer is off (Kafka's default flush.ms, Long.MAX_VALUE, means "never")
OFF_MS = 2**62
#: logs due within this much after the earliest are flushed in the same wake (earlier, never later)
COALESCE_S = 0.005

#: hands one log to the fsync (the log manager's: its dir's group-commit flusher)
Submit = Callable[["Log"], None]


class FlushWindow:
    """One thread that fsyncs each log at most `flush.ms` after its first unsynced append."""

    def __init__(self, submit: Submit, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._submit = submit
        self._clock = clock
        self._cond = threading.Condition()
        #: logs with a deadline in the heap; read without the lock by `dirtied` (a set lookup is atomic)
        self._pending: set[Log] = set()
        self._heap: list[tuple[float, int, Log]] = []
        self._order = itertools.count()  # ties in the heap never compare logs
        #: when the thread wakes next (inf: nothing pending; -inf: awake now, it will look at the heap)
        self._wake_at = float("-inf")
        self._closed = False
        #: wakes that handed logs over, and logs handed over (the metrics read both; this thread writes)
        self.rounds = 0
        self.flushes = 0
        self._thread = threading.Thread(target=self._run, name="flush-window", daemon=True)
        self._thread.start()

    def dirtied(self, target: Log) -> None:
        """`target` was just appended to and nobody fsyncs it now: give it a deadline unless it has one."""
        if target in self._pending:
            return
        window_ms = target.config.flush_interval_ms
        if window_ms >= OFF_MS:
            return
        deadline = self._clock() + window_ms / 1000
        with self._cond:
            if self._closed or target in self._pending:
                return
            self._pending.add(target)
            heapq.heappush(self._heap, (deadline, next(self._order), target))
            if deadline < self._wake_at:
                self._cond.notify()

    @property
    def pending(self) -> int:
        """Logs holding unsynced data with a deadline."""
        return len(self._pending)

    def _run(self) -> None:
        while True:
            with self._cond:
                due = self._take_due()
                if due is None:
                    return
            self.rounds += 1
            for target in due:
                self.flushes += 1
                try:
                    self._submit(target)
                except Exception:  # one log's trouble must not stop the window for the others
                    log.exception("window flush failed", topic=target.topic, partition=target.partition)

    def _take_due(self) -> list[Log] | None:
        """With the condition held: sleep until some log is due, then take every log due by then (each
        marked clean first); None once closed."""
        while not self._closed:
            now = self._clock()
            if self._heap and self._heap[0][0] <= now:
                horizon = now + COALESCE_S
                due = []
                while self._heap and self._heap[0][0] <= horizon:
                    _, _, target = heapq.heappop(self._heap)
                    self._pending.discard(target)
                    due.append(target)
                self._wake_at = float("-inf")
                return due
            self._wake_at = self._heap[0][0] if self._heap else float("inf")
            self._cond.wait(None if not self._heap else self._wake_at - now)
        return None

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop the thread; what is still pending is left to the shutdown's own flush of every log."""
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._pending.clear()
            self._cond.notify_all()
        self._thread.join(timeout)
