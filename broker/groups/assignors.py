"""The server-side assignors of the consumer protocol (KIP-848): `uniform` and `range`.

An assignor maps each member to its target partitions, from the members' subscriptions (topic names
already resolved, regexes included), the topics' ids and partition counts, and the previous target
(for stickiness). Both are pure and deterministic (members in id order), so a restart recomputes the same.

- `uniform` (Kafka's default): every partition of a subscribed topic goes to one subscriber, counts as
  even as the subscriptions allow, and a partition stays where it was whenever that keeps the balance.
- `range`: per topic, the subscribers in member-id order each take a contiguous range of partitions,
  the first `partitions % subscribers` one more (co-partitioned topics line up).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Mapping

from pybroker.broker.groups.consumer_group import Assignment

#: member id -> the names of the topics it subscribes to
Subscriptions = Mapping[str, set[str]]
#: topic name -> (topic id, partition count)
Topics = Mapping[str, tuple[uuid.UUID, int]]
#: passes of the balancing step (each moves every partition it can; bounded so a hostile group costs little)
BALANCE_PASSES = 8
#: partitions x members above which the balancing step is skipped (each pass costs that much)
BALANCE_MAX_WORK = 100_000
Assignor = Callable[[Subscriptions, Topics, Mapping[str, Assignment]], dict[str, Assignment]]


def _freeze(assignment: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    return {member: {topic: frozenset(parts) for topic, parts in topics.items() if parts}
            for member, topics in assignment.items()}


def range_assignor(subscriptions: Subscriptions, topics: Topics,
                   previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    result: dict[str, dict[uuid.UUID, set[int]]] = {member: {} for member in subscriptions}
    for name in sorted({t for subscribed in subscriptions.values() for t in subscribed}):
        if name not in topics:
            continue
        topic_id, count = topics[name]
        members = sorted(m for m, subscribed in subscriptions.items() if name in subscribed)
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            if size:
                result[member][topic_id] = set(range(start, start + size))
            start += size
    return _freeze(result)


def uniform_assignor(subscriptions: Subscriptions, topics: Topics,
                     previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    subscribed = list(subscriptions.values())
    if subscribed and all(s == subscribed[0] for s in subscribed):
        return _uniform_homogeneous(subscriptions, topics, previous)
    return _uniform_heterogeneous(subscriptions, topics, previous)


def _uniform_homogeneous(subscriptions: Subscriptions, topics: Topics,
                         previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Everyone subscribes to the same topics (the usual group): each member gets `P // N` partitions and
    `P % N` of them one more, those that already held the most keeping the extra one; a member keeps what
    it held up to its share. O(P + N log N)."""
    members = sorted(subscriptions)
    ids = {topics[name] for name in next(iter(subscriptions.values())) if name in topics}
    counts = dict(ids)
    taken: set[tuple[uuid.UUID, int]] = set()
    kept: dict[str, list[tuple[uuid.UUID, int]]] = {}
    for member in members:
        mine = []
        for topic_id, parts in sorted(previous.get(member, {}).items(), key=lambda item: str(item[0])):
            for p in sorted(parts):
                key = (topic_id, p)
                if topic_id in counts and p < counts[topic_id] and key not in taken:
                    taken.add(key)
                    mine.append(key)
        kept[member] = mine
    total = sum(counts.values())
    share, extra = divmod(total, len(members))
    order = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: share + (1 if i < extra else 0) for i, m in enumerate(order)}
    for member in members:
        for key in kept[member][quota[member]:]:
            taken.discard(key)
        del kept[member][quota[member]:]
    free = (key for topic_id in sorted(counts, key=str) for key in ((topic_id, p) for p in range(counts[topic_id]))
            if key not in taken)
    result: dict[str, dict[uuid.UUID, set[int]]] = {}
    for member in members:
        mine = kept[member]
        while len(mine) < quota[member]:
            mine.append(next(free))
        result[member] = {}
        for topic_id, p in mine:
            result[member].setdefault(topic_id, set()).add(p)
    return _freeze(result)


def _uniform_heterogeneous(subscriptions: Subscriptions, topics: Topics,
                           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Members subscribe to different topics: sticky up to each member's fair share, the rest to the least
    loaded subscriber of each topic (a heap per topic), then a bounded balancing step."""
    members = sorted(subscriptions)
    load = dict.fromkeys(members, 0)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    eligible: dict[uuid.UUID, list[str]] = {}
    counts: dict[uuid.UUID, int] = {}
    for name in sorted({t for subscribed in subscriptions.values() for t in subscribed}):
        if name in topics:
            topic_id, counts[topic_id] = topics[name]
            eligible[topic_id] = [m for m in members if name in subscriptions[m]]
    # sticky: what a member had stays with it, up to its fair share of the topics it subscribes to
    quota = dict.fromkeys(members, 0.0)
    for topic_id, subscribers in eligible.items():
        for m in subscribers:
            quota[m] += counts[topic_id] / len(subscribers)
    for member in members:
        for topic_id, parts in previous.get(member, {}).items():
            if topic_id not in counts or not any(topics[n][0] == topic_id for n in subscriptions[member]
                                                 if n in topics):
                continue
            for p in sorted(parts):
                key = (topic_id, p)
                if p < counts[topic_id] and key not in owner and load[member] < -(-quota[member] // 1):
                    owner[key] = member
                    load[member] += 1
    for topic_id, subscribers in eligible.items():
        heap = [(load[m], m) for m in subscribers]
        heapq.heapify(heap)
        for p in range(counts[topic_id]):
            if (topic_id, p) in owner:
                continue
            _, chosen = heapq.heappop(heap)
            owner[(topic_id, p)] = chosen
            load[chosen] += 1
            heapq.heappush(heap, (load[chosen], chosen))
    if len(owner) * len(members) <= BALANCE_MAX_WORK:
        _balance(owner, load, eligible)
    result: dict[str, dict[uuid.UUID, set[int]]] = {member: {} for member in members}
    for (topic_id, p), member in owner.items():
        result[member].setdefault(topic_id, set()).add(p)
    return _freeze(result)


def _balance(owner: dict[tuple[uuid.UUID, int], str], load: dict[str, int],
             eligible: dict[uuid.UUID, list[str]]) -> None:
    """Move partitions from a member to a less loaded subscriber until no move narrows the spread."""
    for _ in range(BALANCE_PASSES):
        moved = False
        for key in sorted(owner, key=lambda k: (-load[owner[k]], str(k[0]), k[1])):
            current = owner[key]
            target = min(eligible[key[0]], key=lambda m: (load[m], m))
            if load[current] > load[target] + 1:
                owner[key] = target
                load[current] -= 1
                load[target] += 1
                moved = True
        if not moved:
            return


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assignor, "range": range_assignor}
