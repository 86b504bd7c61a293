"""Share group membership and share fetch sessions, as pure state: joins, epochs, fencing, expiry, caps."""

from __future__ import annotations

import uuid

from pybroker.broker.share.config import ShareConfig
from pybroker.broker.share.share_groups import ShareGroups
from pybroker.broker.share.share_sessions import ShareSessionCache, fetch_order
from pybroker.protocol.errors import ErrorCode

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": (T1, 2), "b": (T2, 1)}


def _groups(**config: int) -> ShareGroups:
    return ShareGroups(ShareConfig(**config), TOPICS.get)


def test_members_share_the_partitions_and_an_epoch_moves_only_in_its_heartbeat() -> None:
    groups = _groups()
    one = groups.heartbeat("g", "m1", 0, None, ["a"], "c", "/h", 0)
    assert one.error is ErrorCode.NONE and one.assignment == {T1: frozenset({0, 1})}
    two = groups.heartbeat("g", "m2", 0, None, ["a", "b"], "c", "/h", 0)
    # Kafka's simple assignor: topic a's two partitions are shared by its two members, one each (m1 keeps
    # the first it held); b is m2's alone
    assert two.assignment == {T1: frozenset({1}), T2: frozenset({0})} and two.member_epoch > one.member_epoch
    again = groups.heartbeat("g", "m1", one.member_epoch, None, None, "c", "/h", 1)  # not fenced by m2's join
    assert again.error is ErrorCode.NONE and again.assignment == {T1: frozenset({0})}
    # Kafka's rule: the previous epoch is accepted (the answer that moved it may be lost) and answered the
    # assignment again; an older one, or one ahead, is fenced
    previous = groups.heartbeat("g", "m1", one.member_epoch, None, None, "c", "/h", 2)
    assert previous.error is ErrorCode.NONE and previous.member_epoch == again.member_epoch
    assert previous.assignment == {T1: frozenset({0})}
    m2 = groups.heartbeat("g", "m2", two.member_epoch, None, ["a"], "c", "/h", 2)  # moves the group epoch
    moved = groups.heartbeat("g", "m1", again.member_epoch, None, None, "c", "/h", 2)
    assert moved.member_epoch == m2.member_epoch > again.member_epoch
    stale = groups.heartbeat("g", "m1", one.member_epoch, None, None, "c", "/h", 2)
    assert stale.error is ErrorCode.FENCED_MEMBER_EPOCH and "smaller" in (stale.message or "")
    ahead = groups.heartbeat("g", "m1", moved.member_epoch + 1, None, None, "c", "/h", 2)
    assert ahead.error is ErrorCode.FENCED_MEMBER_EPOCH and "greater" in (ahead.message or "")
    assert groups.heartbeat("g", "zz", 5, None, None, "c", "/h", 2).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert groups.heartbeat("g", "m3", 0, None, None, "c", "/h", 2).error is ErrorCode.INVALID_REQUEST
    left = groups.heartbeat("g", "m2", -1, None, None, "c", "/h", 3)
    assert (left.error, left.member_epoch, left.departed) == (ErrorCode.NONE, -1, "m2")


def test_members_past_their_session_are_removed_and_the_group_size_is_capped() -> None:
    groups = _groups(session_timeout_ms=100, max_size=2)
    groups.heartbeat("g", "m1", 0, None, ["a"], "c", "/h", 0)
    groups.heartbeat("g", "m2", 0, None, ["a"], "c", "/h", 50)
    assert groups.heartbeat("g", "m3", 0, None, ["a"], "c", "/h", 50).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert groups.next_deadline() == 100
    assert groups.expire(120) == [("g", "m1")]
    assert list(groups.groups["g"].members) == ["m2"]
    assert groups.delete("g") is ErrorCode.NON_EMPTY_GROUP
    assert groups.expire(200) == [("g", "m2")] and groups.delete("g") is ErrorCode.NONE


def test_a_partition_both_added_and_forgotten_leaves_the_session() -> None:
    """As Kafka's session: the request's partitions are added, then its forgotten ones removed. franz-go names a
    partition it no longer reads in both (its last acknowledgements, and forgotten): kept in the session, its
    member went on acquiring that partition's records and dropping them (a suspect in issue 32)."""
    cache = ShareSessionCache(max_sessions=1)
    key = ("g", "m")
    cache.plan(key, 0, [(T1, 0), (T2, 0)], [])
    plan = cache.plan(key, 1, [(T2, 0)], [(T2, 0)])
    assert plan.session is not None and list(plan.session.partitions) == [(T1, 0)]
    plan = cache.plan(key, 2, [(T2, 1)], [(T2, 1)])  # one not in the session before: not kept either
    assert plan.session is not None and list(plan.session.partitions) == [(T1, 0)]


def test_fetch_order_rotates_with_the_epoch() -> None:
    cache = ShareSessionCache(max_sessions=1)
    session = cache.plan(("g", "m"), 0, [(T1, 0), (T1, 1), (T2, 0)], []).session
    assert session is not None
    assert fetch_order(session, 0) == [(T1, 0), (T1, 1), (T2, 0)]
    assert fetch_order(session, 1) == [(T1, 1), (T2, 0), (T1, 0)]
    assert fetch_order(session, 5) == [(T2, 0), (T1, 0), (T1, 1)]
    assert fetch_order(session, -1) == [(T1, 0), (T1, 1), (T2, 0)]


def test_share_session_epochs_and_caps() -> None:
    cache = ShareSessionCache(max_sessions=1)
    key = ("g", "m")
    opened = cache.plan(key, 0, [(T1, 0)], [])
    assert opened.error is ErrorCode.NONE and opened.session is not None
    assert cache.plan(key, 2, [], []).error is ErrorCode.INVALID_SHARE_SESSION_EPOCH
    grown = cache.plan(key, 1, [(T2, 0)], [(T1, 0)])
    assert grown.session is not None and list(grown.session.partitions) == [(T2, 0)]
    assert cache.plan(("g", "other"), 0, [], []).error is ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert cache.plan(("g", "other"), 3, [], []).error is ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.acknowledge(key, 0).error is ErrorCode.INVALID_SHARE_SESSION_EPOCH
    closed = cache.acknowledge(key, -1)
    assert closed.closing and cache.sessions == {}
