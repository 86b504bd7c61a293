"""Turning the coordinator's callbacks into a handler's result: the response now, or a pure wait for it.

Most group requests are answered at once; a JoinGroup waits for the join phase, a SyncGroup for the
leader's assignment, a commit for its fsync. `answer` runs the coordinator call and returns the built
response if the callback already fired, else a pure wait (`waiting`) on a `DelayedOperation`, the broker's
one deferred-response primitive: the coordinator's state already changed, so the connection may start its
next request while this answer waits; the coordinator's callback completes the operation, and a closed
connection abandons it (a callback that comes later is ignored).

Beside `outcomes.py`: that module holds the coordinator's version-free requests and results (the values);
this one holds the handler side's plumbing that turns a result delivered by callback into the handler's
response, now or later. Runs on the event loop's thread only, as the coordinator does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from pybroker.broker.dispatch import Waiting, waiting
from pybroker.broker.partitions.delayed import DelayedOperation

T = TypeVar("T")
R = TypeVar("R")


class CoordinatorAnswer(DelayedOperation[R], Generic[T, R]):
    """Complete when the coordinator calls back (the first call wins), with `build(its outcome)`."""

    __slots__ = ("_build", "_outcome", "_responded")

    def __init__(self, build: Callable[[T], R]) -> None:
        super().__init__()
        self._build = build
        self._outcome: T | None = None
        self._responded = False

    def respond(self, outcome: T) -> None:
        """The coordinator's callback."""
        if not self._responded:
            self._responded = True
            self._outcome = outcome
            self.try_complete()

    def ready(self) -> bool:
        return self._responded

    def answer(self) -> R:
        return self._build(self._outcome)  # type: ignore[arg-type]


def answer(start: Callable[[Callable[[T], None]], None], build: Callable[[T], R]) -> R | Waiting:
    operation: CoordinatorAnswer[T, R] = CoordinatorAnswer(build)
    start(operation.respond)
    if operation.done:
        return operation.value
    return waiting(operation.future())


def client_host(peer: str) -> str:
    """Kafka shows a member's host as the socket address with a leading slash."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return f"/{host}"
