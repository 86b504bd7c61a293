"""The event loop's side of group commit: an asyncio future answered once a log is durable up to an offset.

`flushed(flusher, log, offset)` is what acks=all produce, the offsets topic, transaction markers and the
transaction state topic wait on. The flusher answers through the loop with one `call_soon_threadsafe`
per batch of finished flushes (storage stays synchronous: it only sees the loop as a waker), not one per
future as `asyncio.wrap_future` would.
"""

from __future__ import annotations

import asyncio
from functools import partial

from pybroker.storage.flusher import Flusher, Outcome
from pybroker.storage.log import Log


def flushed(flusher: Flusher, log: Log, offset: int) -> asyncio.Future[int]:
    """A future of the running loop: the new recovery point once `log` is fsynced up to `offset`, or the
    flush's exception (OSError, FlushError, LogClosedError)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[int] = loop.create_future()
    flusher.notify(log, offset, partial(_settle, future), loop)
    return future


def _settle(future: asyncio.Future[int], outcome: Outcome) -> None:
    if future.done():  # cancelled meanwhile: nobody waits for the answer
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
