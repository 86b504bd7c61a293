"""Kafka's simple share assignor (`broker/share/share_assignor.py`), as properties.

Whatever the members, subscriptions, partition counts and last assignment: every subscribed partition has
a member (one that subscribes to its topic); no partition is shared by more than S = ceil(M / P) members;
no member is given more than Kafka's due count, and the due counts differ by at most one. From nothing
(or after a balanced run), the assignment is exactly Kafka's: each partition S members, each member its
due. And an unchanged group keeps its assignment (stickiness).
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.broker.share.share_assignor import Assignment, assign, desired_counts

TOPICS = [uuid.UUID(int=i) for i in range(1, 4)]
members_st = st.lists(st.sampled_from([f"m{i}" for i in range(12)]), min_size=1, max_size=12, unique=True)


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, list[uuid.UUID]], dict[uuid.UUID, int], dict[str, Assignment]]:
    members = draw(members_st)
    partitions = {t: draw(st.integers(1, 6)) for t in TOPICS}
    same = draw(st.booleans())
    shared = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True))
    subscriptions = {m: shared if same else draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3,
                                                          unique=True)) for m in members}
    current: dict[str, Assignment] = {}
    for m in members:
        held = draw(st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 7)), max_size=8))
        by_topic: dict[uuid.UUID, set[int]] = {}
        for t, p in held:
            by_topic.setdefault(t, set()).add(p)
        current[m] = {t: frozenset(p) for t, p in by_topic.items()}
    return subscriptions, partitions, current


def _pools(subscriptions: dict[str, list[uuid.UUID]], partitions: dict[uuid.UUID, int]
           ) -> list[tuple[list[tuple[uuid.UUID, int]], list[str]]]:
    """The partitions shared as one pool, and among which members (as Kafka pools them)."""
    if len({frozenset(t) for t in subscriptions.values()}) == 1:
        topics = next(iter(subscriptions.values()))
        return [([(t, p) for t in topics for p in range(partitions[t])], sorted(subscriptions))]
    every = {t for ts in subscriptions.values() for t in ts}
    return [([(t, p) for p in range(partitions[t])], sorted(m for m, ts in subscriptions.items() if t in ts))
            for t in every]


def _check(subscriptions: dict[str, list[uuid.UUID]], partitions: dict[uuid.UUID, int],
           result: dict[str, Assignment], exact: bool) -> None:
    assert set(result) == set(subscriptions)
    for member, got in result.items():
        assert set(got) <= set(subscriptions[member])  # only topics it subscribes to
    for targets, among in _pools(subscriptions, partitions):
        sharing, due = desired_counts(len(among), len(targets))
        assert max(due) - min(due) <= 1 and sum(due) == sharing * len(targets)
        for tp in targets:
            holders = [m for m in among if tp[1] in result[m].get(tp[0], ())]
            assert 1 <= len(holders) <= sharing, (tp, holders)
            if exact:
                assert len(holders) == sharing
        for member, count in zip(among, due, strict=True):
            got = sum(1 for t, p in targets if p in result[member].get(t, ()))
            assert got <= count if not exact else got == count


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups())
def test_every_partition_has_a_member_and_members_are_balanced(group: tuple) -> None:
    subscriptions, partitions, current = group
    first = assign(subscriptions, partitions, current)
    _check(subscriptions, partitions, first, exact=False)
    fresh = assign(subscriptions, partitions, {})
    _check(subscriptions, partitions, fresh, exact=True)
    assert assign(subscriptions, partitions, fresh) == fresh  # nothing changed: nothing moves


def test_members_beyond_the_partitions_share_them() -> None:
    topic = TOPICS[0]
    five = assign({f"m{i}": [topic] for i in range(5)}, {topic: 2}, {})
    # S = ceil(5 / 2) = 3 members per partition, 6 assignments over 5 members: one member reads both
    counts = sorted(len(a.get(topic, ())) for a in five.values())
    assert counts == [1, 1, 1, 1, 2]
    assert all(sum(p in a.get(topic, ()) for a in five.values()) == 3 for p in (0, 1))
    fewer = assign({"m1": [topic], "m2": [topic]}, {topic: 4}, {})
    assert sorted(len(a[topic]) for a in fewer.values()) == [2, 2]  # members fewer: each partition to one member
    assert fewer["m1"][topic] | fewer["m2"][topic] == frozenset(range(4))
