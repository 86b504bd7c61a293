"""Share group membership written as records and read back (`broker/share/share_group_log.py`).

A hypothesis run drives `ShareGroups` with joins, heartbeats (current, previous and stale epochs),
subscription changes, leaves and expiries; after each step the difference is written as records (bytes,
through Kafka's layout). Replaying the bytes at any point must give the group back as it is: epochs,
members, their epochs, targets and what each was last answered. A deleted group's tombstones leave nothing.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.broker.share.config import ShareConfig
from pybroker.broker.share.share_group_log import (
    ReplayedShareGroup,
    Written,
    changes,
    group_tombstones,
    restore_share_group,
)
from pybroker.broker.share.share_groups import ShareGroup, ShareGroups
from pybroker.protocol.offsets_topic_records import decode_record
from pybroker.protocol.share_offsets_records import ShareRecord

TOPICS = {"a": (uuid.UUID(int=1), 2), "b": (uuid.UUID(int=2), 1), "c": (uuid.UUID(int=3), 3)}
MEMBERS = ["m1", "m2", "m3"]

step = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS), st.lists(st.sampled_from(sorted(TOPICS)), min_size=1,
                                                                   max_size=3)),
    st.tuples(st.just("beat"), st.sampled_from(MEMBERS), st.sampled_from([0, -1, -2])),
    st.tuples(st.just("subscribe"), st.sampled_from(MEMBERS), st.lists(st.sampled_from(sorted(TOPICS)), min_size=1,
                                                                        max_size=3)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS), st.none()),
    st.tuples(st.just("expire"), st.sampled_from(MEMBERS), st.none()),
)


def _replayed(log: list[tuple[bytes, bytes | None]]) -> dict[str, ReplayedShareGroup]:
    found: dict[str, ReplayedShareGroup] = {}
    for key, value in log:
        record = decode_record(key, value)
        assert isinstance(record, ShareRecord)
        found.setdefault(record.group, ReplayedShareGroup()).apply(record)
    return found


def _shape(group: ShareGroup) -> tuple[object, ...]:
    return (group.epoch, group.assignment_epoch, group.metadata_hash, group.initialized, sorted(
        (m.member_id, m.member_epoch, m.previous_member_epoch, m.client_id, m.client_host, m.rack_id, m.subscribed,
         m.assignment, m.sent) for m in group.members.values()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=25))
def test_replaying_the_records_gives_the_group_back(steps: list[tuple[str, str, object]]) -> None:
    groups = ShareGroups(ShareConfig(session_timeout_ms=1000), TOPICS.get)
    log: list[tuple[bytes, bytes | None]] = []
    written = Written()
    now = 0
    for kind, member_id, arg in steps:
        now += 10
        group = groups.get("g")
        member = group.members.get(member_id) if group is not None else None
        if kind == "join":
            groups.heartbeat("g", member_id, 0, "r1", list(arg), f"c-{member_id}", "/h", now)  # type: ignore[arg-type]
        elif member is None:
            continue
        elif kind == "beat":
            offset = int(arg)  # type: ignore[call-overload]
            epoch = member.member_epoch if offset == 0 else member.previous_member_epoch if offset == -1 else 0
            groups.heartbeat("g", member_id, epoch or member.member_epoch, None, None, f"c-{member_id}", "/h2", now)
        elif kind == "subscribe":
            groups.heartbeat("g", member_id, member.member_epoch, None, list(arg), f"c-{member_id}", "/h",  # type: ignore[arg-type]
                             now)
        elif kind == "leave":
            groups.heartbeat("g", member_id, -1, None, None, "", "", now)
        else:
            member.deadline_ms = now
            groups.expire(now)
        group = groups.get("g")
        assert group is not None
        records, written = changes(group, written)
        log += records
        restored, again = restore_share_group("g", _replayed(log)["g"], 0)
        assert _shape(restored) == _shape(group)
        assert changes(restored, again)[0] == []  # what the log holds is known: nothing to write again
    group = groups.get("g")
    if group is not None:
        group.members.clear()
        records, written = changes(group, written)
        log += records + group_tombstones("g", written)
        assert not _replayed(log)["g"].exists and _replayed(log)["g"].members == {}
