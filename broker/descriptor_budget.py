"""The connections the open-file limit allows, so a flood of idle clients meets a clean refusal, not EMFILE.

A connection costs one descriptor (its socket; see `broker.writable_waiter`). Of the soft limit
(`ulimit -n`, raised at start by `broker.resource_limits`), a headroom of a sixteenth (at least
`MIN_HEADROOM_FDS`) is kept for the runtime, segment reads, splice pipes and checkpoint writes, and room
is kept for partitions: the partitions held now, or a quarter of the limit (at most the partition cap)
while fewer are held. Connections may have the rest. The figure is logged at start.

At the budget a new connection takes the place of the connection silent the longest, if one has been
silent for `EVICT_IDLE_S` with nothing in progress (as Kafka closes the least recently used connection
when a listener is over its limit, KIP-402); otherwise it is refused. A descriptor error (EMFILE, ENFILE)
while a connection is being set up closes that connection, and the broker then refuses new connections
for `BACKOFF_S` without touching a descriptor, as Kafka's acceptor backs off, before it tries again.
Refusals and evictions are counted (`pybroker_connections_refused{reason="open_files"}`,
`pybroker_connections_expired{reason="open_files"}`) and warned about at a limited rate.

Event-loop thread only.
"""

from __future__ import annotations

import errno
import resource
from collections.abc import Callable

#: descriptors never given to connections or partitions: the runtime, segment reads, pipes, checkpoints
MIN_HEADROOM_FDS = 256
HEADROOM_SHARE = 16
#: the room kept for partitions while fewer are held: a quarter of the limit (at most the partition cap)
PARTITION_ROOM_SHARE = 4
#: a connection at the budget may take the place of one silent this long with nothing in progress
EVICT_IDLE_S = 3.0
#: after a descriptor error, new connections are refused for this long before the broker tries again
BACKOFF_S = 1.0
#: the errors that mean "out of descriptors" (the process's or the system's)
OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
#: the reason label of the refusals' and evictions' metrics
REASON = "open_files"


def headroom(soft_limit: int) -> int:
    return max(MIN_HEADROOM_FDS, soft_limit // HEADROOM_SHARE)


def connection_budget(soft_limit: int, partition_cap: int, partitions_held: int = 0) -> int:
    """Connections the limit allows beside `partitions_held` partitions (and the room kept for more)."""
    if soft_limit == resource.RLIM_INFINITY:
        return 2**31 - 1
    room = max(partitions_held, min(partition_cap, soft_limit // PARTITION_ROOM_SHARE))
    return max(soft_limit - headroom(soft_limit) - room, 0)


class DescriptorBudget:
    """Whether one more connection fits, given the connections and partitions held now."""

    def __init__(self, soft_limit: int, partition_cap: int, partitions_held: Callable[[], int]) -> None:
        self.soft_limit = soft_limit
        self.partition_cap = partition_cap
        self._partitions_held = partitions_held
        self._backoff_until = 0.0

    @property
    def connections(self) -> int:
        """The budget now (it shrinks as partitions past the kept room are created)."""
        return connection_budget(self.soft_limit, self.partition_cap, self._partitions_held())

    def backing_off(self, now: float) -> bool:
        return now < self._backoff_until

    def out_of_descriptors(self, now: float) -> None:
        """A descriptor error met: refuse new connections for a while."""
        self._backoff_until = now + BACKOFF_S

    def full(self, open_connections: int) -> bool:
        return open_connections >= self.connections
