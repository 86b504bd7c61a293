"""Where fetches wait for data: futures keyed by partition, woken when an append moves its log end.

A long-poll fetch registers one future on every partition it reads and awaits it with its own timeout;
the produce path calls `notify` after each append. No sleep loops: a waiting fetch costs a dict entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

PartitionKey = tuple[str, int]


class Purgatory:
    __slots__ = ("_waiters", "closed")

    def __init__(self) -> None:
        self._waiters: dict[PartitionKey, set[asyncio.Future[None]]] = {}
        #: set at shutdown: woken fetches answer with what they have instead of waiting again
        self.closed = False

    def watch(self, keys: Iterable[PartitionKey]) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        return future

    def unwatch(self, keys: Iterable[PartitionKey], future: asyncio.Future[None]) -> None:
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    del self._waiters[key]

    def notify(self, key: PartitionKey) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def wake_all(self) -> None:
        """At shutdown: let every waiting fetch answer with what it has."""
        self.closed = True
        for key in list(self._waiters):
            self.notify(key)

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiters.values())
