"""Changes a request hands to a worker thread, run to their end even when the request is cancelled.

A client that closes its connection cancels its requests' tasks (`KafkaConnection.connection_lost`), but a
thread cannot be cancelled: a topic deletion it began goes on. Awaited directly, the cancelled task would
drop what was to run on the loop after the thread (waking the fetches that wait on a deleted partition),
and nothing would know the change was still under way. `DetachedWork.run` runs the thread's work, and its
follow-up on the loop, as a task of its own; the request awaits it through a shield. The broker's stop
waits for every such task before the logs close (`BrokerApp.stop`), and so can a test that compares the
broker's state before and after a restart.

Loop thread only (the work itself runs on the default executor's threads).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class DetachedWork:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def run(self, fn: Callable[..., T], *args: Any, then: Callable[[], object] | None = None) -> asyncio.Future[T]:
        """`fn(*args)` on a worker thread, then `then()` on the loop (whether `fn` returned or raised); what
        `fn` gave, as a future whose cancellation leaves the work running."""
        task = asyncio.get_running_loop().create_task(self._work(fn, args, then))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return asyncio.shield(task)

    @staticmethod
    async def _work(fn: Callable[..., T], args: tuple[Any, ...], then: Callable[[], object] | None) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        finally:
            if then is not None:
                then()

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the work under way now; True when none is left."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
        return not self._tasks
