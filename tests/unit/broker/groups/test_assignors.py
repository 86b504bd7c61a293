"""The consumer protocol's server-side assignors: every subscribed partition goes to exactly one of its
subscribers; `uniform` balances (within one partition when everyone subscribes alike) and is sticky; `range`
gives contiguous ranges."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.groups.assignors import range_assignor, uniform_assignor

TOPICS = {"a": (uuid.UUID(int=1), 7), "b": (uuid.UUID(int=2), 3), "c": (uuid.UUID(int=3), 12)}
members = st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, max_size=8, unique=True)
subscription = st.sets(st.sampled_from(sorted(TOPICS)), min_size=1)


def _check_complete(subscriptions: dict[str, set[str]], result: dict) -> None:
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for member, assignment in result.items():
        for topic_id, parts in assignment.items():
            name = next(n for n, (tid, _) in TOPICS.items() if tid == topic_id)
            assert name in subscriptions[member], "assigned a topic it does not subscribe to"
            for p in parts:
                assert (topic_id, p) not in owners
                owners[(topic_id, p)] = member
    wanted = {(TOPICS[n][0], p) for subs in subscriptions.values() for n in subs for p in range(TOPICS[n][1])}
    assert set(owners) == wanted


@settings(max_examples=200, deadline=None)
@given(members, st.data())
def test_uniform_assigns_everything_once_and_balances(names: list[str], data: st.DataObject) -> None:
    homogeneous = data.draw(st.booleans())
    common = data.draw(subscription)
    subscriptions = {m: (common if homogeneous else data.draw(subscription)) for m in names}
    first = uniform_assignor(subscriptions, TOPICS, {})
    _check_complete(subscriptions, first)
    if homogeneous:
        loads = [sum(len(p) for p in a.values()) for a in first.values()]
        assert max(loads) - min(loads) <= 1
    # one member more: the others keep what they had as far as their new share allows (sticky)
    if homogeneous and len(names) < 8:
        newcomer = next(f"m{i}" for i in range(8) if f"m{i}" not in subscriptions)
        second = uniform_assignor({**subscriptions, newcomer: common}, TOPICS, first)
        _check_complete({**subscriptions, newcomer: common}, second)
        for member in names:
            before = {(t, p) for t, parts in first[member].items() for p in parts}
            after = {(t, p) for t, parts in second[member].items() for p in parts}
            assert after <= before, "a member got partitions while another's were moved to the newcomer"


@settings(max_examples=100, deadline=None)
@given(members, st.data())
def test_range_assigns_contiguous_ranges(names: list[str], data: st.DataObject) -> None:
    subscriptions = {m: data.draw(subscription) for m in names}
    result = range_assignor(subscriptions, TOPICS, {})
    _check_complete(subscriptions, result)
    for assignment in result.values():
        for parts in assignment.values():
            assert sorted(parts) == list(range(min(parts), max(parts) + 1))
