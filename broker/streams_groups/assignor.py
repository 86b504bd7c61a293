"""The streams group's task assignor: active tasks sticky and balanced, standby tasks on other processes.

Pure: `assign` takes the tasks (subtopology id -> task count), the members (their process and what they
own now) and the number of standby replicas, and returns each member's target: active, standby and
warm-up tasks. Its promises, checked by a property test (tests/unit/broker/streams_groups/):

- every task is active on exactly one member;
- active counts differ by at most one between members;
- a member keeps an active task it owns as long as that keeps the balance (stickiness);
- a stateful task's standbys sit on processes other than its active one's and each other's, up to
  `standby_replicas` of them, each preferring a member that held it before, then the least loaded
  (a stateless task gets none);
- warm-up tasks are not handed out: a task moves at once, as in Kafka 4.4.0, whose sticky assignor returns
  active and standby tasks only and whose assignment refiner (where warm-ups would be made) passes the
  assignment through unchanged.

Any thread (pure); the coordinator calls it on the event loop, and the caps on topologies and group size
bound its work (O(tasks x members) at worst).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: subtopology id -> partitions (task ids), as members own them and targets name them
Tasks = dict[str, frozenset[int]]
Task = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What the assignor knows of a member."""

    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Target:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


def task_set(tasks: Tasks) -> set[Task]:
    return {(sub, p) for sub, parts in tasks.items() for p in parts}


def as_tasks(tasks: set[Task]) -> Tasks:
    out: dict[str, set[int]] = {}
    for sub, p in tasks:
        out.setdefault(sub, set()).add(p)
    return {sub: frozenset(parts) for sub, parts in sorted(out.items())}


def assign(tasks: Mapping[str, int], members: Mapping[str, MemberSpec], standby_replicas: int = 0,
           stateful: frozenset[str] | None = None) -> dict[str, Target]:
    """Targets for `members`; standbys only for the subtopologies in `stateful` (None: all of them), as a
    task without state has nothing to keep warm."""
    if not members:
        return {}
    order = sorted(members)
    all_tasks = sorted((sub, p) for sub, count in tasks.items() for p in range(count))
    active: dict[str, set[Task]] = {m: set() for m in order}
    owner: dict[Task, str] = {}
    floor = len(all_tasks) // len(order)
    # keep what members own, up to the floor of the balance
    for member_id in order:
        for task in sorted(task_set(members[member_id].active)):
            if task in owner or task[0] not in tasks or task[1] >= tasks[task[0]]:
                continue
            if len(active[member_id]) < floor:
                active[member_id].add(task)
                owner[task] = member_id
    # the rest to the least loaded, preferring its previous owner, then a member holding its standby
    extra_slots = len(all_tasks) % len(order)  # how many members may hold one more than the floor
    for task in all_tasks:
        if task in owner:
            continue
        candidates = [m for m in order if len(active[m]) < floor or (len(active[m]) == floor and extra_slots > 0)]

        def preference(m: str, task: Task = task) -> tuple[int, int, str]:
            spec = members[m]
            had = task[1] in spec.active.get(task[0], frozenset())
            warm = task[1] in spec.standby.get(task[0], frozenset())
            return (0 if had else 1 if warm else 2, len(active[m]), m)

        chosen = min(candidates, key=preference)
        if len(active[chosen]) == floor:
            extra_slots -= 1
        active[chosen].add(task)
        owner[task] = chosen
    standby: dict[str, set[Task]] = {m: set() for m in order}
    if standby_replicas > 0:
        load = {m: len(active[m]) for m in order}
        for task in all_tasks:
            if stateful is not None and task[0] not in stateful:
                continue
            used = {members[owner[task]].process_id}
            for _ in range(standby_replicas):
                candidates = [m for m in order if members[m].process_id not in used]
                if not candidates:
                    break

                def standby_preference(m: str, task: Task = task) -> tuple[int, int, str]:
                    spec = members[m]
                    held = task[1] in spec.standby.get(task[0], frozenset()) or \
                        task[1] in spec.active.get(task[0], frozenset())
                    return (0 if held else 1, load[m], m)

                chosen = min(candidates, key=standby_preference)
                standby[chosen].add(task)
                load[chosen] += 1
                used.add(members[chosen].process_id)
    return {m: Target(as_tasks(active[m]), as_tasks(standby[m]), {}) for m in order}
