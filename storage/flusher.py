"""Group commit: one thread per log dir fsyncs logs for every waiter that asked before its round.

`request(log, offset)` returns a `concurrent.futures.Future` that completes once the log is durable at
least up to `offset`. Each round takes all pending requests, fsyncs each log once, and completes every
future that fsync covered, so a hundred concurrent acks=all producers cost one fsync per log per round.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from concurrent.futures import Future
from typing import Any


class Flusher:
    def __init__(self, name: str) -> None:
        self._cond = threading.Condition()
        self._pending: list[tuple[Any, int, Future[int]]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"flusher-{name}", daemon=True)
        self._thread.start()

    def request(self, log: Any, offset: int) -> Future[int]:
        future: Future[int] = Future()
        if log.recovery_point >= offset:
            future.set_result(log.recovery_point)
            return future
        with self._cond:
            if self._closed:
                future.set_exception(RuntimeError("flusher closed"))
                return future
            self._pending.append((log, offset, future))
            self._cond.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending and self._closed:
                    return
                batch, self._pending = self._pending, []
            by_log: dict[int, list[tuple[Any, int, Future[int]]]] = defaultdict(list)
            for item in batch:
                by_log[id(item[0])].append(item)
            for waiters in by_log.values():
                log = waiters[0][0]
                try:
                    point = log.flush()
                except BaseException as exc:  # every waiter must hear about it
                    for _, _, future in waiters:
                        future.set_exception(exc)
                    continue
                retry = []
                for item in waiters:
                    if item[1] <= point:
                        item[2].set_result(point)
                    else:
                        retry.append(item)
                if retry:
                    with self._cond:
                        self._pending.extend(retry)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=30)
