"""Where delayed operations wait on partitions: each is checked again when one of its partitions changes.

Kafka's `DelayedOperationPurgatory`. An operation is watched under the keys (topic, partition) whose
change may let it complete; `notify(key)` (an append, a marker, a deletion, a log dir going offline) runs
the completion check of every operation watching that key, and a completed one leaves every key it was
watched under. Checking is the operation's business (`DelayedOperation.ready`), so a wake costs what its
check costs: a fetch compares positions, it does not re-read. No sleep loops: a waiting fetch costs a dict
entry per partition and one timer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pybroker.broker.partitions.delayed import DelayedOperation

PartitionKey = tuple[str, int]


class Purgatory:
    __slots__ = ("_watchers", "closed")

    def __init__(self) -> None:
        self._watchers: dict[PartitionKey, set[DelayedOperation[Any]]] = {}
        #: set at shutdown: operations complete with what they have instead of waiting again
        self.closed = False

    def watch(self, operation: DelayedOperation[Any], keys: Iterable[PartitionKey]) -> None:
        """Check `operation` again whenever one of `keys` changes, until it completes (at shutdown:
        complete it now)."""
        if operation.done:
            return
        if self.closed:
            operation.force_complete()
            return
        keys = tuple(keys)
        operation.watching = keys
        for key in keys:
            self._watchers.setdefault(key, set()).add(operation)
        operation.on_done(self._unwatch)

    def _unwatch(self, operation: DelayedOperation[Any]) -> None:
        for key in operation.watching:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(operation)
                if not watchers:
                    del self._watchers[key]
        operation.watching = ()

    def notify(self, key: PartitionKey) -> None:
        """`key` changed: every operation watching it checks whether it can complete now."""
        watchers = self._watchers.get(key)
        if watchers:
            for operation in list(watchers):
                operation.wake(key)

    def wake_all(self) -> None:
        """At shutdown: every waiting operation completes now with what it has."""
        self.closed = True
        for watchers in list(self._watchers.values()):
            for operation in list(watchers):
                operation.force_complete()

    def __len__(self) -> int:
        return sum(len(w) for w in self._watchers.values())
