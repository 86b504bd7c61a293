"""Group commit: one thread per log dir fsyncs logs for every waiter that asked before its round.

`request(log, offset)` returns a `concurrent.futures.Future` that completes once the log is durable at
least up to `offset` (the broker wraps it with `asyncio.wrap_future` for acks=all). Each round takes
all pending requests, fsyncs each log once, and answers every waiter of that log: a hundred concurrent
acks=all producers cost one fsync per log per round, not a hundred. A failed fsync fails that log's
waiters with the `OSError` (the broker answers KAFKA_STORAGE_ERROR); other logs are unaffected.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from pybroker.storage.errors import FlushError

if TYPE_CHECKING:
    from pybroker.storage.log import Log

Waiter = tuple["Log", int, "Future[int]"]


class Flusher:
    def __init__(self, name: str) -> None:
        self._cond = threading.Condition()
        self._pending: list[Waiter] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"flusher-{name}", daemon=True)
        self._thread.start()

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
        with self._cond:
            if self._closed:
                future.set_exception(FlushError("the flusher is closed"))
                return future
            self._pending.append((log, offset, future))
            self._cond.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return  # closed and drained
                round_, self._pending = self._pending, []
            self._flush_round(round_)

    @staticmethod
    def _flush_round(round_: list[Waiter]) -> None:
        by_log: dict[int, tuple[Log, list[tuple[int, Future[int]]]]] = {}
        for log, offset, future in round_:
            if future.set_running_or_notify_cancel():  # a cancelled waiter needs no answer
                by_log.setdefault(id(log), (log, []))[1].append((offset, future))
        for log, waiters in by_log.values():
            try:
                point = log.flush(max(offset for offset, _ in waiters))
            except Exception as exc:
                for _, future in waiters:
                    future.set_exception(exc)
                continue
            for offset, future in waiters:
                if offset <= point:
                    future.set_result(point)
                else:  # the log was truncated below it meanwhile
                    future.set_exception(FlushError(f"offset {offset} was truncated before it was fsynced"))

    def close(self, timeout: float | None = 30.0) -> None:
        """Answer every pending request, then stop the thread; later requests fail."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)
