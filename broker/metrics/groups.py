"""What the metrics need from the group coordinator, and consumer lag computed from it.

The coordinator is not the metrics' business: the collector takes a `groups_snapshot` callable that
returns, per group, its state, member count and committed offsets (`GroupView`, matched structurally,
so the coordinator's own snapshot type fits without importing anything from here). Without a
provider the group families are registered but empty.

Lag is Kafka's `kafka-consumer-groups` LAG: log end offset minus committed offset, per partition the
group has committed for, never below zero (a log truncated under a commit has nothing left to read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol


class GroupView(Protocol):
    @property
    def group_id(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def members(self) -> int: ...

    @property
    def committed(self) -> Mapping[tuple[str, int], int]: ...


GroupsSnapshot = Callable[[], Iterable[GroupView]]


def consumer_lag(group: GroupView, log_end_offset: Callable[[str, int], int | None]
                 ) -> Iterator[tuple[str, int, int]]:
    """(topic, partition, lag) for each committed partition whose log still exists."""
    for (topic, partition), committed in sorted(group.committed.items()):
        end = log_end_offset(topic, partition)
        if end is None or committed < 0:
            continue
        yield topic, partition, max(0, end - committed)
