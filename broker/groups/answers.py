"""Turning the coordinator's callbacks into a handler's result: the response now, or an awaitable of it.

Most group requests are answered at once; a JoinGroup waits for the join phase, a SyncGroup for the
leader's assignment, a commit for its fsync. `answer` runs the coordinator call and returns the built
response if the callback already fired, else a pure wait (`waiting`): the coordinator's state already
changed, so the connection may start its next request while this answer waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from pybroker.broker.dispatch import Waiting, waiting

T = TypeVar("T")
R = TypeVar("R")


def answer(start: Callable[[Callable[[T], None]], None], build: Callable[[T], R]) -> R | Waiting:
    ready: list[T] = []
    future: asyncio.Future[T] | None = None

    def respond(outcome: T) -> None:
        if future is None:
            ready.append(outcome)
        elif not future.done():
            future.set_result(outcome)

    start(respond)
    if ready:
        return build(ready[0])
    future = asyncio.get_running_loop().create_future()

    async def wait() -> R:
        assert future is not None
        return build(await future)

    return waiting(wait())


def client_host(peer: str) -> str:
    """Kafka shows a member's host as the socket address with a leading slash."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return f"/{host}"
