"""Waiting for sockets to become writable without a second descriptor per socket.

The send queue writes a plain-TCP connection's socket itself (writev, sendfile, splice) and, when the
socket takes no more, must learn when it is writable again. The event loop refuses `add_writer` on a
descriptor its transport owns, and a duplicate of every socket doubled what each connection cost of the
open-file limit. So one epoll instance per event loop watches every waiting socket (EPOLLOUT, one shot)
and the loop watches that one descriptor: a connection costs one descriptor, the broker one more.

Lifetime: a socket's descriptor belongs to its transport, which closes it. The kernel drops a closed
socket from the epoll set by itself, so no event comes for a closed descriptor; a descriptor number
reused by a new connection may be registered again at once, and `cancel` removes a registration only
when it is its caller's (an old queue closing late must not cancel the new connection's wait). Callers
must not hand in a descriptor whose transport is closing (`SendQueue` checks first).

Event-loop thread only: `wait`, `cancel` and the callbacks all run on the loop that owns the waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import weakref
from collections.abc import Callable

#: events read from the epoll instance per wake-up (more wait for the next one)
MAX_EVENTS = 1024
_ONE_SHOT_WRITABLE = select.EPOLLOUT | select.EPOLLONESHOT


class WritableWaiter:
    """One loop's watch of the sockets whose send queues wait to write."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._epoll = select.epoll()
        self._callbacks: dict[int, Callable[[], None]] = {}
        # descriptors registered before (a one-shot event disarms a registration without removing it): a
        # socket that waits again is re-armed with one call instead of a refused `register` and a `modify`
        self._registered: set[int] = set()
        # the waiter must not hold the loop (it is the value of a weak dict keyed by the loop)
        loop.add_reader(self._epoll.fileno(), self._ready)

    def wait(self, fd: int, callback: Callable[[], None]) -> None:
        """Call `callback` once, on the loop, when `fd` is writable (or errored: the write then says why)."""
        self._callbacks[fd] = callback
        if fd in self._registered:
            try:
                self._epoll.modify(fd, _ONE_SHOT_WRITABLE)
                return
            except FileNotFoundError:  # closed since, and the number reused: the kernel dropped it
                pass
        try:
            self._epoll.register(fd, _ONE_SHOT_WRITABLE)
        except FileExistsError:  # registered before: a one-shot event disarms it without removing it
            self._epoll.modify(fd, _ONE_SHOT_WRITABLE)
        self._registered.add(fd)

    def cancel(self, fd: int, callback: Callable[[], None]) -> None:
        """Stop waiting for `fd`, if `callback` is still what waits for it."""
        if self._callbacks.get(fd) is not callback:
            return
        del self._callbacks[fd]
        self._registered.discard(fd)
        with contextlib.suppress(OSError):  # closed already: the kernel dropped it itself
            self._epoll.unregister(fd)

    def _ready(self) -> None:
        for fd, _events in self._epoll.poll(0, MAX_EVENTS):
            callback = self._callbacks.pop(fd, None)
            if callback is not None:
                callback()


_WAITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WritableWaiter] = weakref.WeakKeyDictionary()


def waiter_for(loop: asyncio.AbstractEventLoop) -> WritableWaiter:
    """The loop's waiter, made on first use (one descriptor for the loop's life)."""
    waiter = _WAITERS.get(loop)
    if waiter is None:
        waiter = _WAITERS[loop] = WritableWaiter(loop)
    return waiter
