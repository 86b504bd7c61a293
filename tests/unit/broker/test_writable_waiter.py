"""The loop's one watch of waiting sockets: a callback once per wait, and a late cancel of a descriptor
number now used by another wait leaves that wait alone."""

from __future__ import annotations

import asyncio
import socket

from pybroker.broker.writable_waiter import WritableWaiter, waiter_for


async def test_a_writable_socket_calls_back_once() -> None:
    ours, peer = socket.socketpair()
    try:
        waiter = waiter_for(asyncio.get_running_loop())
        assert waiter is waiter_for(asyncio.get_running_loop())
        called: list[int] = []
        waiter.wait(ours.fileno(), lambda: called.append(1))
        await asyncio.sleep(0.05)
        assert called == [1]
        await asyncio.sleep(0.05)
        assert called == [1]  # one shot
        waiter.wait(ours.fileno(), lambda: called.append(2))  # armed again after a one-shot event
        await asyncio.sleep(0.05)
        assert called == [1, 2]
    finally:
        ours.close()
        peer.close()


async def test_a_late_cancel_by_the_old_owner_leaves_the_new_wait_alone() -> None:
    waiter = WritableWaiter(asyncio.get_running_loop())
    ours, peer = socket.socketpair()
    try:
        called: list[str] = []

        def old() -> None:
            called.append("old")

        def new() -> None:
            called.append("new")

        fd = ours.fileno()
        waiter.wait(fd, old)
        waiter.cancel(fd, old)
        waiter.wait(fd, new)  # the number reused by another connection
        waiter.cancel(fd, old)  # the old queue closing late
        await asyncio.sleep(0.05)
        assert called == ["new"]
    finally:
        ours.close()
        peer.close()


async def test_a_number_closed_and_reused_without_a_cancel_is_watched_again() -> None:
    """A socket that waited once is re-armed with one call; once it is closed (the kernel drops it from the
    epoll set by itself) its number may come back as a new socket, which must still be watched."""
    waiter = WritableWaiter(asyncio.get_running_loop())
    called: list[str] = []
    first, first_peer = socket.socketpair()
    number = first.fileno()
    waiter.wait(number, lambda: called.append("first"))
    await asyncio.sleep(0.05)
    first.close()  # closed with no cancel: its number is free again
    first_peer.close()
    sockets = [socket.socketpair() for _ in range(4)]
    try:
        reused = [s for pair in sockets for s in pair if s.fileno() == number]
        assert reused, "the kernel hands out the lowest free number: the closed socket's"
        waiter.wait(number, lambda: called.append("second"))
        await asyncio.sleep(0.05)
        assert called == ["first", "second"]
    finally:
        for a, b in sockets:
            a.close()
            b.close()
