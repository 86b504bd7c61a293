"""Kafka's simple share assignor (KIP-932's `simple`): which members read which share-partitions.

Kafka's rule, from its `SimpleAssignor` (Kafka 4.4): with M members and P partitions to share, each partition
is given to S = ceil(M / P) members (one while members are no more than partitions), and the S * P
assignments are spread over the members so that any two members' counts differ by at most one (member i
of M is due ceil(S*P*(i+1)/M) - ceil(S*P*i/M)). Balance comes first, then stickiness: what a member held
and still subscribes to is kept unless the member is over its due or the partition is shared by more than
S members. When every member subscribes to the same topics, their partitions are shared as one pool;
otherwise each topic is shared among the members subscribing to it, on its own.

Every partition gets at least one member: while a partition has fewer than S members, the assignments made
are fewer than the members are due, so some member has room, and a partition with no member is one it
does not hold. (Kafka tolerates, as we do, that a partition short of S members finds only members that
already hold it.) Which member gets which partition follows member ids in sorted order: Kafka's choices
follow its hash maps' order, so the assignments are balanced alike but not the same.

Pure; the event loop calls it (`share_groups.ShareGroups`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

#: topic id -> its partitions
Assignment = dict[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]


def desired_counts(members: int, partitions: int) -> tuple[int, list[int]]:
    """(S, each member's due count) for `members` sharing `partitions` (Kafka's integer rule)."""
    if members == 0 or partitions == 0:
        return 0, [0] * members
    sharing = -(-members // partitions)
    total = sharing * partitions
    return sharing, [-(-total * (i + 1) // members) - -(-total * i // members) for i in range(members)]


def share_out(targets: Sequence[TopicPartition], members: Sequence[str],
              held: Mapping[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    """Share `targets` among `members` (in that order), keeping what each `held` where balance allows."""
    sharing, due = desired_counts(len(members), len(targets))
    wanted = set(targets)
    owners: dict[TopicPartition, list[str]] = {tp: [] for tp in targets}
    result: dict[str, set[TopicPartition]] = {}
    for member, count in zip(members, due, strict=True):
        kept = sorted(tp for tp in held.get(member, ()) if tp in wanted)[:count]  # over its due: the rest goes
        result[member] = set(kept)
        for tp in kept:
            owners[tp].append(member)
    for tp, holders in owners.items():  # shared by more than S: the fullest members give it up
        while len(holders) > sharing:
            fullest = max(holders, key=lambda m: (len(result[m]), m))
            holders.remove(fullest)
            result[fullest].discard(tp)
    room = {member: count for member, count in zip(members, due, strict=True)}
    for floor in range(1, sharing + 1):  # every partition one member first, then a second, ... up to S
        for tp in targets:
            holders = owners[tp]
            if len(holders) >= floor:
                continue
            free = [m for m in members if len(result[m]) < room[m] and tp not in result[m]]
            if not free:
                continue
            chosen = min(free, key=lambda m: (len(result[m]) - room[m], len(result[m])))
            holders.append(chosen)
            result[chosen].add(tp)
    return result


def assign(subscriptions: Mapping[str, Sequence[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
           current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Each member's partitions: `subscriptions` are the topic ids each member subscribes to that exist,
    `partitions` their partition counts, `current` what each member was assigned last."""
    members = sorted(subscriptions)
    held = {m: {(t, p) for t, parts in current.get(m, {}).items() for p in parts} for m in members}
    shared: dict[str, set[TopicPartition]] = {m: set() for m in members}
    topic_sets = {frozenset(subscriptions[m]) for m in members}
    if len(topic_sets) == 1:  # homogeneous: one pool of every subscribed partition
        topics = sorted(next(iter(topic_sets)), key=str)
        pools = [(topics, members)]
    else:  # heterogeneous: each topic among its own subscribers
        every = sorted({t for m in members for t in subscriptions[m]}, key=str)
        pools = [([t], [m for m in members if t in subscriptions[m]]) for t in every]
    for topics, among in pools:
        targets = [(t, p) for t in topics for p in range(partitions.get(t, 0))]
        for member, got in share_out(targets, among, held).items():
            shared[member] |= got
    out: dict[str, Assignment] = {}
    for member, got in shared.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic, partition in got:
            by_topic.setdefault(topic, set()).add(partition)
        out[member] = {t: frozenset(p) for t, p in by_topic.items()}
    return out
