"""The group coordinator's deadlines (sessions, pending members, join and sync phases) as timers, not a scan.

Each group has at most one live entry in a heap, at or before the first time a tick could act on it
(`deadline_of`, which the coordinator hands in: the earliest of its classic and consumer-protocol
deadlines). Whatever can bring that time forward (a request on the group, a persisted assignment, a tick
that acted) calls `schedule`, which pushes a new entry only when it is earlier than the group's live one;
a heartbeat, which only pushes deadlines later, pushes nothing: the stale entry fires, finds nothing due,
and the group is rescheduled at its real deadline. `due(now)` pops the groups whose entry is due, so a
tick does what a scan of every group would do at `now`, at a cost that does not grow with idle groups;
`next_deadline()` says when to tick next, and `on_earlier_deadline` tells the timer when that moved
earlier. Event loop's thread only.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from pybroker.broker.groups.group import Group
from pybroker.broker.groups.group_store import GroupStore


class GroupTimers:
    def __init__(self, store: GroupStore, deadline_of: Callable[[Group], int | None]) -> None:
        self.store = store
        self.deadline_of = deadline_of
        #: (deadline, tie-breaker, group id): when a tick must look at a group (module docstring)
        self.heap: list[tuple[int, int, str]] = []
        #: group id -> the deadline of its live heap entry (older, later entries are stale)
        self.scheduled: dict[str, int] = {}
        self._sequence = itertools.count()
        #: called with the new earliest deadline when one is scheduled before every other (the timer re-arms)
        self.on_earlier_deadline: Callable[[int], None] | None = None

    def due(self, now: int) -> set[str]:
        """The groups whose live entry is due by `now` (their entries are gone: a tick reschedules them)."""
        due: set[str] = set()
        timers = self.heap
        while timers and timers[0][0] <= now:
            deadline, _, group_id = heapq.heappop(timers)
            if self.scheduled.get(group_id) == deadline:
                del self.scheduled[group_id]
                due.add(group_id)
        return due

    def next_deadline(self) -> int | None:
        """When a tick has something to do next (None: nothing is timed)."""
        timers = self.heap
        while timers and self.scheduled.get(timers[0][2]) != timers[0][0]:
            heapq.heappop(timers)  # stale: the group was rescheduled earlier, or is gone
        return timers[0][0] if timers else None

    def schedule_id(self, group_id: str) -> None:
        group = self.store.groups.get(group_id)
        if group is not None:
            self.schedule(group)

    def schedule(self, group: Group) -> None:
        """Make sure the group's live timer is at or before the first time a tick could act on it."""
        deadline = self.deadline_of(group)
        if deadline is None:
            return
        current = self.scheduled.get(group.group_id)
        if current is not None and current <= deadline:
            return  # an earlier entry will fire first and reschedule
        earliest = self.next_deadline()
        self.scheduled[group.group_id] = deadline
        heapq.heappush(self.heap, (deadline, next(self._sequence), group.group_id))
        if (earliest is None or deadline < earliest) and self.on_earlier_deadline is not None:
            self.on_earlier_deadline(deadline)
