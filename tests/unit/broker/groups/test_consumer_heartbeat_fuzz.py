"""Arbitrary ConsumerGroupHeartbeats (any epochs, ids, subscriptions, regexes, owned partitions, assignors, in
any order, with time passing) never make the coordinator raise, always get one of the codes Kafka's spec lists
for the API, and leave no partition owned twice."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.groups.consumer_kit import T1, T2, heartbeat, make

E = ErrorCode
ALLOWED = {E.NONE, E.INVALID_REQUEST, E.UNKNOWN_MEMBER_ID, E.FENCED_MEMBER_EPOCH, E.UNSUPPORTED_ASSIGNOR,
           E.UNRELEASED_INSTANCE_ID, E.GROUP_MAX_SIZE_REACHED, E.INVALID_REGULAR_EXPRESSION, E.GROUP_ID_NOT_FOUND,
           E.FENCED_INSTANCE_ID}

owned = st.none() | st.dictionaries(st.sampled_from([T1, T2, uuid.UUID(int=9)]),
                                    st.frozensets(st.integers(-2, 8), max_size=5), max_size=3)
beat = st.fixed_dictionaries({
    "member_id": st.sampled_from(["", "a", "b", "c"]),
    "epoch": st.integers(-3, 4),
    "topics": st.none() | st.lists(st.sampled_from(["t1", "t2", "missing", ""]), max_size=4),
    "regex": st.none() | st.sampled_from(["", "t.*", "(a)\\1", "[", "t[12]"]),
    "owned": owned,
    "instance": st.none() | st.sampled_from(["", "i1", "i2"]),
    "assignor": st.none() | st.sampled_from(["uniform", "range", "nope"]),
    "rebalance": st.sampled_from([-1, 0, 1000]),
    "advance": st.integers(0, 50_000),
})


@settings(max_examples=150, deadline=None)
@given(st.lists(beat, min_size=1, max_size=25), st.booleans())
def test_arbitrary_heartbeats(beats: list[dict], tick: bool) -> None:
    co, _, _ = make(consumer_max_size=3)
    now = 0
    for b in beats:
        now += b.pop("advance")
        if tick:
            co.tick(now)
        answer = heartbeat(co, now, b["member_id"], b["epoch"], topics=b["topics"], regex=b["regex"],
                           owned=b["owned"], instance=b["instance"], assignor=b["assignor"], rebalance=b["rebalance"])
        assert answer.error in ALLOWED, answer
        group = co.groups.get("g")
        if group is not None and group.consumer is not None:
            seen: set[tuple[uuid.UUID, int]] = set()
            for member in group.consumer.members.values():
                for assignment in (member.assigned, member.pending_revocation):
                    for topic, parts in assignment.items():
                        for p in parts:
                            assert (topic, p) not in seen
                            seen.add((topic, p))
