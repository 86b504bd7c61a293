"""Time-based rules: when a member's silence ends its membership, and when committed offsets expire."""

from __future__ import annotations

from pybroker.broker.groups.group import CommittedOffset, Group, Member
from pybroker.broker.groups.state_machine import GroupState

S = GroupState

#: how long a new member may wait in its first JoinGroup without heartbeating (Kafka's constant)
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


def expired_offsets(group: Group, now: int, retention_ms: int) -> list[tuple[str, int]]:
    """Kafka's expiry: an explicit expire time wins; in an empty group every offset ages from the time
    the group became empty; in a live consumer group only topics nobody subscribes to age, from their
    commit time; other live groups keep their offsets."""
    if group.is_(S.EMPTY) and not group.has_members:
        def base(c: CommittedOffset) -> int:
            return group.state_timestamp_ms if group.state_timestamp_ms >= 0 else c.commit_timestamp
        candidates = list(group.offsets)
    else:
        subscribed = group.subscribed_topics()
        if subscribed is None:
            return []

        def base(c: CommittedOffset) -> int:
            return c.commit_timestamp
        candidates = [key for key in group.offsets if key[0] not in subscribed]
    expired = []
    for key in candidates:
        c = group.offsets[key]
        deadline = c.expire_timestamp if c.expire_timestamp >= 0 else base(c) + retention_ms
        if now >= deadline:
            expired.append(key)
    return expired


def keeps_alive(member: Member, now: int) -> bool:
    """Kafka's rule: a member waiting in JoinGroup lives (a new one for at most `NEW_MEMBER_JOIN_TIMEOUT_MS`,
    so a client that vanished mid-join does not hold the phase open for a whole rebalance timeout); one
    waiting in SyncGroup lives; any other must have heartbeated within its session timeout."""
    if member.join_waiter is not None:
        return not member.is_new or now < member.last_heartbeat_ms + NEW_MEMBER_JOIN_TIMEOUT_MS
    if member.sync_waiter is not None:
        return True
    return now < member.session_deadline_ms()


def member_deadline(member: Member) -> int | None:
    """The first time at which `keeps_alive(member, now)` turns false as things stand (None: never while
    it waits where it waits). A heartbeat or a change of waiting moves it; the coordinator's timers
    recompute it then."""
    if member.join_waiter is not None:
        return member.last_heartbeat_ms + NEW_MEMBER_JOIN_TIMEOUT_MS if member.is_new else None
    if member.sync_waiter is not None:
        return None
    return member.session_deadline_ms()
