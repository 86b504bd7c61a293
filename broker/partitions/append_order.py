"""Per-partition order of clients' appends, whichever path their validation took.

A compressed batch is validated in a worker thread (`validator.VALIDATION_POOL`) while later requests for
the same partition keep arriving on the event loop; their appends must still reach the log in the order
the requests arrived. Each deferred append takes its turn on the loop before it leaves (`enter`), waits
for the one before it, and hands over when done (`leave`); an append validated on the loop defers itself
while a turn is pending (`busy`).

Threads: the event loop only (the markers are asyncio futures). One `AppendOrder` per `ReplicaManager`.
"""

from __future__ import annotations

import asyncio

from pybroker.broker.partitions.purgatory import PartitionKey


class AppendOrder:
    """The last pending append of each partition that has one: each new turn waits for it."""

    __slots__ = ("_tails",)

    def __init__(self) -> None:
        self._tails: dict[PartitionKey, asyncio.Future[None]] = {}

    def busy(self, key: PartitionKey) -> bool:
        """An earlier append to `key` is still waiting for its validation or its turn."""
        return key in self._tails

    def enter(self, key: PartitionKey) -> tuple[asyncio.Future[None] | None, asyncio.Future[None]]:
        """(the append to wait for first, this append's own marker); call `leave` with the marker."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        previous = self._tails.get(key)
        self._tails[key] = mine
        return previous, mine

    def leave(self, key: PartitionKey, mine: asyncio.Future[None]) -> None:
        mine.set_result(None)
        if self._tails.get(key) is mine:
            del self._tails[key]
