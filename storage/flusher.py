"""Group commit: a small pool of threads per log dir fsyncs logs for every waiter that asked meanwhile.

`request(log, offset)` returns a `concurrent.futures.Future`, `wait(log, offset)` (on the event loop)
an `asyncio.Future`; either completes once the log is durable at least up to `offset`. Each log is its
own group-commit queue: a flush of a log takes all its pending requests, fsyncs it once and answers every
one of them, so a hundred concurrent acks=all producers cost one fsync per log per round, not a hundred.
While one log is being flushed, requests for it gather for its next round.

Why a pool, not one thread: an acks=all request spread over 1,024 partitions needs 1,024 fsyncs, and one
thread doing them one after another makes every round as slow as their sum. `WORKERS` threads keep that
many logs' fsyncs in flight at once (the disk and the kernel's journal take concurrent syncs much better
than serial ones), and a log's waiters are answered as soon as *their own* log is synced, never after
another log's. A log is flushed by one worker at a time (its next round waits for the current one).

Why one loop wake per batch of answers: `wait`'s futures belong to the event loop and can only be
completed on it. Instead of one `call_soon_threadsafe` per future (a lock and a self-pipe write each,
1,024 of them for one wide produce), workers put finished answers in an outbox per loop, and only the
worker that finds the outbox empty schedules the one callback that drains it, so a round's answers (and
whatever else finished before the loop got to them) cost one wake.

A failed fsync fails that log's waiters with the `OSError` (the broker answers KAFKA_STORAGE_ERROR);
other logs are unaffected.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING

from pybroker.storage.errors import FlushError

if TYPE_CHECKING:
    from pybroker.storage.log import Log

#: fsyncs in flight at once per log dir (more than a few gains nothing on one device and costs threads)
WORKERS = 8

#: a future of either kind with what it waits for
Waiter = tuple[int, "Future[int] | asyncio.Future[int]"]


class _LogQueue:
    """One log's pending requests; `queued` while it sits in the ready queue, `busy` while it is flushed."""

    __slots__ = ("busy", "log", "queued", "waiters")

    def __init__(self, log: Log) -> None:
        self.log = log
        self.waiters: list[Waiter] = []
        self.queued = False
        self.busy = False


class _Outbox:
    """Answers for one event loop's futures, delivered by one callback per batch."""

    __slots__ = ("answers", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.answers: list[tuple[asyncio.Future[int], int | BaseException]] = []


def _deliver(answers: list[tuple[asyncio.Future[int], int | BaseException]]) -> None:
    """On the loop: complete every future of a batch (a cancelled one needs no answer)."""
    for future, outcome in answers:
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


class Flusher:
    def __init__(self, name: str, workers: int = WORKERS) -> None:
        self._cond = threading.Condition()
        self._queues: dict[int, _LogQueue] = {}
        self._ready: deque[_LogQueue] = deque()
        self._busy = 0
        self._closed = False
        self._outboxes: dict[asyncio.AbstractEventLoop, _Outbox] = {}
        self._outbox_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, name=f"flusher-{name}-{i}", daemon=True)
                         for i in range(max(1, workers))]
        for thread in self._threads:
            thread.start()

    def request(self, log: Log, offset: int) -> Future[int]:
        """A future resolved (with the new recovery point) once `log` is fsynced up to `offset`."""
        future: Future[int] = Future()
        point = log.recovery_point
        if offset <= point:
            future.set_result(point)
            return future
        if offset > log.log_end_offset:
            future.set_exception(FlushError(f"offset {offset} is beyond the log end {log.log_end_offset}"))
            return future
        if not self._enqueue(log, offset, future):
            future.set_exception(FlushError("the flusher is closed"))
        return future

    def wait(self, log: Log, offset: int) -> asyncio.Future[int]:
        """As `request`, as a future of the running event loop (call it on the loop): answered with one
        loop wake per batch of finished flushes, not one per future."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        point = log.recovery_point
        if offset <= point:
            future.set_result(point)
            return future
        if offset > log.log_end_offset:
            future.set_exception(FlushError(f"offset {offset} is beyond the log end {log.log_end_offset}"))
            return future
        if loop not in self._outboxes:
            with self._outbox_lock:
                self._outboxes.setdefault(loop, _Outbox(loop))
        if not self._enqueue(log, offset, future):
            future.set_exception(FlushError("the flusher is closed"))
        return future

    def _enqueue(self, log: Log, offset: int, future: Future[int] | asyncio.Future[int]) -> bool:
        with self._cond:
            if self._closed:
                return False
            queue = self._queues.get(id(log))
            if queue is None or queue.log is not log:
                queue = self._queues[id(log)] = _LogQueue(log)
            queue.waiters.append((offset, future))
            if not queue.queued and not queue.busy:
                queue.queued = True
                self._ready.append(queue)
                self._cond.notify()
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._ready and not (self._closed and not self._busy):
                    self._cond.wait()
                if not self._ready:
                    self._cond.notify_all()  # closed and drained: let the other workers see it too
                    return
                queue = self._ready.popleft()
                queue.queued = False
                queue.busy = True
                self._busy += 1
                round_, queue.waiters = queue.waiters, []
            try:
                self._flush_round(queue.log, round_)
            finally:
                with self._cond:
                    queue.busy = False
                    self._busy -= 1
                    if queue.waiters:  # asked while it was being flushed: its next round
                        queue.queued = True
                        self._ready.append(queue)
                        self._cond.notify()
                    elif self._queues.get(id(queue.log)) is queue:
                        del self._queues[id(queue.log)]
                    if self._closed:
                        self._cond.notify_all()

    def _flush_round(self, log: Log, round_: list[Waiter]) -> None:
        """fsync `log` once for every waiter of this round, then answer them."""
        waiters = [(offset, future) for offset, future in round_
                   if not (future.cancelled() if isinstance(future, asyncio.Future)
                           else not future.set_running_or_notify_cancel())]
        if not waiters:
            return
        outcomes: list[tuple[Future[int] | asyncio.Future[int], int | BaseException]]
        try:
            point = self._sync(log, max(offset for offset, _ in waiters))
        except Exception as exc:
            outcomes = [(future, exc) for _, future in waiters]
        else:  # an offset above the point: the log was truncated below it meanwhile
            outcomes = [(future, point if offset <= point else
                         FlushError(f"offset {offset} was truncated before it was fsynced"))
                        for offset, future in waiters]
        self._answer(outcomes)

    @staticmethod
    def _sync(log: Log, up_to: int) -> int:
        """The one fsync of a round (a seam for tests that hold the flusher back)."""
        return log.flush(up_to)

    def _answer(self, outcomes: list[tuple[Future[int] | asyncio.Future[int], int | BaseException]]) -> None:
        posts: list[_Outbox] = []
        for future, outcome in outcomes:
            if isinstance(future, asyncio.Future):
                outbox = self._outboxes[future.get_loop()]
                with self._outbox_lock:
                    if not outbox.answers:
                        posts.append(outbox)
                    outbox.answers.append((future, outcome))
            elif isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        for outbox in posts:
            try:
                outbox.loop.call_soon_threadsafe(self._drain, outbox)
            except RuntimeError:  # the loop is closed: nobody is left to answer
                with self._outbox_lock:
                    outbox.answers.clear()

    def _drain(self, outbox: _Outbox) -> None:
        with self._outbox_lock:
            answers, outbox.answers = outbox.answers, []
        _deliver(answers)

    def close(self, timeout: float | None = 30.0) -> None:
        """Answer every pending request, then stop the threads; later requests fail."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
