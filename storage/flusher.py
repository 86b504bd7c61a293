"""Group commit: a small pool of threads per log dir fsyncs logs for every waiter that asked meanwhile.

`request(log, offset)` returns a `concurrent.futures.Future`; `notify(log, offset, done, waker)` calls
`done` on the waker's thread (the broker passes its event loop); either answers once the log is durable
at least up to `offset`. Each log is its
own group-commit queue: a flush of a log takes all its pending requests, fsyncs it once and answers every
one of them, so a hundred concurrent acks=all producers cost one fsync per log per round, not a hundred.
While one log is being flushed, requests for it gather for its next round.

Why a pool, not one thread: an acks=all request spread over 1,024 partitions needs 1,024 fsyncs, and one
thread doing them one after another makes every round as slow as their sum. `WORKERS` threads keep that
many logs' fsyncs in flight at once (the disk and the kernel's journal take concurrent syncs much better
than serial ones), and a log's waiters are answered as soon as *their own* log is synced, never after
another log's. A log is flushed by one worker at a time (its next round waits for the current one).

Why one wake per batch of answers: the broker's waiters are asyncio futures, which can only be completed
on the event loop. Instead of one `call_soon_threadsafe` per future (a lock and a self-pipe write each,
1,024 of them for one wide produce), workers put finished answers in an outbox per waker, and only the
worker that finds the outbox empty schedules the one callback that drains it, so a round's answers (and
whatever else finished before the loop got to them) cost one wake. (Storage stays synchronous: it knows
the loop only as something with `call_soon_threadsafe`.)

Why the loop wakes at most one worker per iteration: waking a sleeping thread is a futex call that, on a
VM, costs the loop tens of microseconds (an interrupt to the other CPU). With acks=all over many
partitions every request readies its own log, so `notify` (called on the waker's own thread) only queues
the log and asks the waker to run `_wake_deferred` once, after the rest of the iteration's requests: it
wakes one worker, and a worker that takes a log wakes the next while more are ready, so the fsyncs still
go out in parallel, and the wakes are paid by the workers, not the loop. (`request`, from any thread,
wakes at once.)

A failed fsync fails that log's waiters with the `OSError` (the broker answers KAFKA_STORAGE_ERROR);
other logs are unaffected.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from pybroker.storage.errors import FlushError

if TYPE_CHECKING:
    from pybroker.storage.log import Log

log = structlog.get_logger("pybroker.storage.flusher")

#: fsyncs in flight at once per log dir (more than a few gains nothing on one device and costs threads)
WORKERS = 8

#: the recovery point reached, or why the log could not be made durable
Outcome = int | BaseException
Done = Callable[[Outcome], None]


class Waker(Protocol):
    """Whatever runs `done` callbacks on its own thread (an asyncio event loop is one): `call_soon` from
    that thread, `call_soon_threadsafe` from any."""

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> Any: ...

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any) -> Any: ...


class _Outbox:
    """Answers for one waker's callbacks, delivered by one `call_soon_threadsafe` per batch; and whether the
    waker is already due to wake a worker for the logs its thread readied (`wake_due`, its thread only)."""

    __slots__ = ("answers", "wake_due", "waker")

    def __init__(self, waker: Waker) -> None:
        self.waker = waker
        self.answers: list[tuple[Done, Outcome]] = []
        self.wake_due = False


class _Notice:
    """A waiter answered through its waker: `done(outcome)` runs on the waker's thread."""

    __slots__ = ("done", "outbox")

    def __init__(self, done: Done, outbox: _Outbox) -> None:
        self.done = done
        self.outbox = outbox


#: what a request waits for, and who is told
Waiter = tuple[int, "Future[int] | _Notice"]


class _LogQueue:
    """One log's pending requests; `queued` while it sits in the ready queue, `busy` while it is flushed."""

    __slots__ = ("busy", "log", "queued", "waiters")

    def __init__(self, log: Log) -> None:
        self.log = log
        self.waiters: list[Waiter] = []
        self.queued = False
        self.busy = False


class Flusher:
    def __init__(self, name: str, workers: int = WORKERS) -> None:
        self._cond = threading.Condition()
        self._queues: dict[int, _LogQueue] = {}
        self._ready: deque[_LogQueue] = deque()
        self._busy = 0
        #: workers waiting for work that no `notify` has woken yet: one wide request readies a thousand
        #: logs, which needs as many wake-ups as there are sleepers, not a thousand
        self._sleeping = 0
        self._closed = False
        self._outboxes: dict[Waker, _Outbox] = {}
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

    def notify(self, log: Log, offset: int, done: Done, waker: Waker) -> None:
        """As `request`, but called on the waker's thread, and `done(recovery point or exception)` is called
        there too, with one `call_soon_threadsafe` per batch of finished flushes, not one per waiter; the
        worker is woken once the waker's current callbacks are done (`_wake_deferred`). Already durable (or
        never possible): `done` is called at once."""
        point = log.recovery_point
        if offset <= point:
            done(point)
            return
        if offset > log.log_end_offset:
            done(FlushError(f"offset {offset} is beyond the log end {log.log_end_offset}"))
            return
        outbox = self._outboxes.get(waker)
        if outbox is None:
            with self._outbox_lock:
                outbox = self._outboxes.setdefault(waker, _Outbox(waker))
        if not self._enqueue(log, offset, _Notice(done, outbox), wake=False):
            done(FlushError("the flusher is closed"))
            return
        if not outbox.wake_due:
            outbox.wake_due = True
            waker.call_soon(self._wake_deferred, outbox)

    def _wake_deferred(self, outbox: _Outbox) -> None:
        """On the waker's thread, after the callbacks that readied logs: one worker for all of them."""
        outbox.wake_due = False
        with self._cond:
            if self._ready:
                self._wake_one()

    def _enqueue(self, log: Log, offset: int, future: Future[int] | _Notice, *, wake: bool = True) -> bool:
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
                if wake:
                    self._wake_one()
        return True

    def _wake_one(self) -> None:
        """With the condition held: wake a sleeping worker for a newly ready log, if one is asleep."""
        if self._sleeping:
            self._sleeping -= 1
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._ready and not (self._closed and not self._busy):
                    self._sleeping += 1
                    self._cond.wait()
                if not self._ready:
                    self._sleeping = 0
                    self._cond.notify_all()  # closed and drained: let the other workers see it too
                    return
                queue = self._ready.popleft()
                if self._ready:  # more logs ready: the next sleeper takes one (woken here, not by the loop)
                    self._wake_one()
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
                    if queue.waiters:  # asked while it was being flushed: its next round (this worker
                        queue.queued = True  # takes the first ready log itself, and wakes one for the rest)
                        self._ready.append(queue)
                    elif self._queues.get(id(queue.log)) is queue:
                        del self._queues[id(queue.log)]
                    if self._closed:
                        self._sleeping = 0
                        self._cond.notify_all()

    def _flush_round(self, log: Log, round_: list[Waiter]) -> None:
        """fsync `log` once for every waiter of this round, then answer them."""
        waiters = [(offset, future) for offset, future in round_  # a cancelled future needs no answer
                   if isinstance(future, _Notice) or future.set_running_or_notify_cancel()]
        if not waiters:
            return
        outcomes: list[tuple[Future[int] | _Notice, Outcome]]
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

    def _answer(self, outcomes: list[tuple[Future[int] | _Notice, Outcome]]) -> None:
        posts: list[_Outbox] = []
        for future, outcome in outcomes:
            if isinstance(future, _Notice):
                outbox = future.outbox
                with self._outbox_lock:
                    if not outbox.answers:  # nobody has asked the waker to drain it yet: this worker will
                        posts.append(outbox)
                    outbox.answers.append((future.done, outcome))
            elif isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        for outbox in posts:
            try:
                outbox.waker.call_soon_threadsafe(self._drain, outbox)
            except RuntimeError:  # the loop is closed: nobody is left to answer
                with self._outbox_lock:
                    outbox.answers.clear()

    def _drain(self, outbox: _Outbox) -> None:
        """On the waker's thread: every answer that arrived since the last drain."""
        with self._outbox_lock:
            answers, outbox.answers = outbox.answers, []
        for done, outcome in answers:
            try:
                done(outcome)
            except Exception:  # one waiter's bug must not leave the others unanswered
                log.exception("flush waiter failed")

    def close(self, timeout: float | None = 30.0) -> None:
        """Answer every pending request, then stop the threads; later requests fail."""
        with self._cond:
            self._closed = True
            self._sleeping = 0
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
