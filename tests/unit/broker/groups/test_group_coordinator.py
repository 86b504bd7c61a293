"""The classic group coordinator's rules, driven with an injected clock: no test here sleeps.

A fake `GroupLog` records what would be written and completes writes when the test says so (at once by
default), so durability ordering (nothing answered before its write completes) is visible too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.groups.coordinator import GroupCoordinator
from pybroker.broker.groups.offsets_topic import committed_offset
from pybroker.broker.groups.outcomes import (
    CommitRequest,
    JoinOutcome,
    JoinRequest,
    OffsetToCommit,
    SyncOutcome,
    SyncRequest,
)
from pybroker.broker.groups.state_machine import TRANSITIONS, Event, GroupState, IllegalTransition, next_state
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.offsets_topic_records import GroupRecord, OffsetRecord, decode_record

S = GroupState
SESSION = 10_000
REBALANCE = 30_000


class FakeLog:
    def __init__(self) -> None:
        self.written: list[tuple[int, list[tuple[bytes, bytes | None]]]] = []
        #: the (producer id, epoch) of each write, None for a plain one
        self.producers: list[tuple[int, int] | None] = []
        self.hold = False
        self.held: list[Callable[[ErrorCode], None]] = []
        self.next_offset = 0

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int,
               done: Callable[[ErrorCode], None], *, producer: tuple[int, int] | None = None) -> int:
        self.written.append((partition, records))
        self.producers.append(producer)
        position, self.next_offset = self.next_offset, self.next_offset + len(records)
        if self.hold:
            self.held.append(done)
        else:
            done(ErrorCode.NONE)
        return position

    def release(self, code: ErrorCode = ErrorCode.NONE) -> None:
        held, self.held = self.held, []
        for done in held:
            done(code)

    def decoded(self) -> list[Any]:
        return [decode_record(k, v) for _, records in self.written for k, v in records]


class Box:
    """Collects the answers a waiting request gets (there must be exactly one)."""

    def __init__(self) -> None:
        self.answers: list[Any] = []

    def __call__(self, outcome: Any) -> None:
        self.answers.append(outcome)

    @property
    def answered(self) -> bool:
        return bool(self.answers)

    @property
    def one(self) -> Any:
        assert len(self.answers) == 1, self.answers
        return self.answers[0]


def make(initial_delay: int = 0, **kwargs: Any) -> tuple[GroupCoordinator, FakeLog]:
    log = FakeLog()
    ids = iter(range(1, 10_000))
    config = GroupConfig(num_partitions=50, initial_rebalance_delay_ms=initial_delay, **kwargs)
    return GroupCoordinator(config, log, new_member_id=lambda client: f"{client}-{next(ids)}"), log


def join_req(member: str = "", *, group: str = "g", client: str = "c", protocols: Any = None,
             instance: str | None = None, session: int = SESSION, rebalance: int = REBALANCE,
             known_id: bool = False, protocol_type: str = "consumer") -> JoinRequest:
    return JoinRequest(group, member, instance, client, "/127.0.0.1", session, rebalance, protocol_type,
                       protocols if protocols is not None else [("range", b"sub-" + client.encode())],
                       require_known_member_id=known_id)


def join(co: GroupCoordinator, now: int, member: str = "", **kwargs: Any) -> Box:
    box = Box()
    co.join(join_req(member, **kwargs), now, box)
    return box


def sync(co: GroupCoordinator, now: int, member: str, generation: int, assignments: dict[str, bytes] | None = None,
         group: str = "g") -> Box:
    box = Box()
    co.sync(SyncRequest(group, generation, member, None, None, None, assignments or {}), now, box)
    return box


# -- the transition table --------------------------------------------------------------------------

def test_table_is_kafkas_valid_previous_states() -> None:
    previous: dict[GroupState, set[GroupState]] = {}
    for (state, _), target in TRANSITIONS.items():
        previous.setdefault(target, set()).add(state)
    assert previous[S.PREPARING_REBALANCE] == {S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE}
    assert previous[S.COMPLETING_REBALANCE] == {S.PREPARING_REBALANCE}
    assert previous[S.STABLE] == {S.COMPLETING_REBALANCE, S.EMPTY}  # Empty -> Stable only when loaded
    assert previous[S.EMPTY] == {S.PREPARING_REBALANCE}
    assert previous[S.DEAD] == set(GroupState)


@pytest.mark.parametrize("state", list(GroupState))
@pytest.mark.parametrize("event", list(Event))
def test_every_pair_is_either_in_the_table_or_refused(state: GroupState, event: Event) -> None:
    if (state, event) in TRANSITIONS:
        assert next_state(state, event) is TRANSITIONS[(state, event)]
    else:
        with pytest.raises(IllegalTransition):
            next_state(state, event)


# -- join and sync ---------------------------------------------------------------------------------

def test_single_member_joins_syncs_and_is_stable_without_waiting() -> None:
    co, log = make()
    box = join(co, 0)
    outcome: JoinOutcome = box.one
    assert outcome.error == ErrorCode.NONE
    assert outcome.generation == 1 and outcome.leader == outcome.member_id
    assert [m.member_id for m in outcome.members] == [outcome.member_id]
    assert outcome.protocol_name == "range"
    s = sync(co, 1, outcome.member_id, 1, {outcome.member_id: b"assign"})
    assert s.one == SyncOutcome(ErrorCode.NONE, "consumer", "range", b"assign")
    assert co.groups["g"].state is S.STABLE
    record = log.decoded()[-1]
    assert isinstance(record, GroupRecord) and record.value is not None
    assert record.value.generation == 1 and record.value.members[0].assignment == b"assign"


def test_v4_new_member_first_gets_its_id_then_joins() -> None:
    co, _ = make()
    first = join(co, 0, known_id=True).one
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    assert co.groups["g"].pending_members
    second = join(co, 1, first.member_id, known_id=True).one
    assert second.error == ErrorCode.NONE and second.member_id == first.member_id


def test_pending_member_that_never_rejoins_expires() -> None:
    co, _ = make()
    first = join(co, 0, known_id=True).one
    co.tick(SESSION + 1)
    assert not co.groups["g"].pending_members
    assert join(co, SESSION + 2, first.member_id, known_id=True).one.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_initial_delay_waits_for_more_members_then_forms_one_generation() -> None:
    co, _ = make(initial_delay=3000)
    a = join(co, 0, client="a")
    b = join(co, 1000, client="b")
    assert not a.answered and not b.answered
    co.tick(2999)
    assert not a.answered
    co.tick(3000)  # a new member arrived during the delay: wait one more delay
    assert not a.answered
    co.tick(6000)
    assert a.one.generation == b.one.generation == 1
    assert len(a.one.members) + len(b.one.members) == 2  # only the leader sees the members


def test_second_member_triggers_rebalance_and_both_get_disjoint_shares() -> None:
    co, _ = make()
    a_id = join(co, 0, client="a").one.member_id
    sync(co, 0, a_id, 1, {a_id: b"all"})
    b = join(co, 10, client="b")
    assert not b.answered and co.groups["g"].state is S.PREPARING_REBALANCE
    # a learns through its heartbeat, rejoins; the phase completes at once
    assert co.heartbeat("g", 1, a_id, None, 20) == ErrorCode.REBALANCE_IN_PROGRESS
    a = join(co, 30, a_id, client="a")
    assert a.one.generation == b.one.generation == 2
    b_id = b.one.member_id
    sb = sync(co, 40, b_id, 2)
    assert not sb.answered  # followers wait for the leader's assignment
    sa = sync(co, 41, a_id, 2, {a_id: b"p0,p1", b_id: b"p2,p3"})
    assert (sa.one.assignment, sb.one.assignment) == (b"p0,p1", b"p2,p3")


def test_followers_wait_for_the_assignment_to_be_durable() -> None:
    co, log = make()
    a_id = join(co, 0).one.member_id
    log.hold = True
    s = sync(co, 1, a_id, 1, {a_id: b"x"})
    assert not s.answered and co.groups["g"].state is S.COMPLETING_REBALANCE
    log.release()
    assert s.one.error == ErrorCode.NONE and co.groups["g"].state is S.STABLE


def test_failed_assignment_write_sends_members_back_to_rejoin() -> None:
    co, log = make()
    a_id = join(co, 0).one.member_id
    log.hold = True
    s = sync(co, 1, a_id, 1, {a_id: b"x"})
    log.release(ErrorCode.KAFKA_STORAGE_ERROR)
    assert s.one.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert co.groups["g"].state is S.PREPARING_REBALANCE


def test_rebalance_during_rebalance_restarts_the_join_phase() -> None:
    co, _ = make()
    a_id = join(co, 0, client="a").one.member_id
    b = join(co, 1, client="b")  # a must rejoin
    assert co.groups["g"].state is S.PREPARING_REBALANCE
    c = join(co, 2, client="c")  # joins the same phase
    assert not b.answered and not c.answered
    a = join(co, 3, a_id, client="a")
    assert {a.one.generation, b.one.generation, c.one.generation} == {2}
    # a member changes its protocols while the group completes: back to PreparingRebalance
    b_id = b.one.member_id
    again = join(co, 4, b_id, client="b", protocols=[("range", b"new")])
    assert co.groups["g"].state is S.PREPARING_REBALANCE and not again.answered


def test_rejoin_with_same_metadata_while_completing_returns_the_same_answer() -> None:
    co, _ = make()
    first = join(co, 0).one
    again = join(co, 1, first.member_id).one
    assert again.generation == first.generation and again.error == ErrorCode.NONE


def test_members_that_do_not_rejoin_in_time_are_dropped_at_the_rebalance_timeout() -> None:
    co, _ = make()
    a_id = join(co, 0, client="a", rebalance=5000).one.member_id
    sync(co, 0, a_id, 1, {a_id: b""})
    b = join(co, 100, client="b", rebalance=5000)
    co.tick(5099)
    assert not b.answered
    co.tick(5100)
    assert b.one.generation == 2 and [m.member_id for m in b.one.members] == [b.one.member_id]
    assert list(co.groups["g"].members) == [b.one.member_id]


def test_leader_that_never_syncs_is_dropped_after_the_rebalance_timeout() -> None:
    co, _ = make()
    a = join(co, 0, client="a", rebalance=5000)
    b = join(co, 1, client="b", rebalance=5000)
    a2 = join(co, 2, a.answers[-1].member_id, client="a", rebalance=5000)
    leader = co.groups["g"].leader_id
    follower = next(m for m in co.groups["g"].members if m != leader)
    s = sync(co, 3, follower, co.groups["g"].generation)
    co.tick(2 + 5000)
    assert leader not in co.groups["g"].members
    assert s.one.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert a2.answered and b.answered


# -- heartbeats and sessions -----------------------------------------------------------------------

def test_heartbeat_codes() -> None:
    co, _ = make()
    a_id = join(co, 0).one.member_id
    assert co.heartbeat("g", 1, a_id, None, 1) == ErrorCode.NONE  # CompletingRebalance
    assert co.heartbeat("g", 0, a_id, None, 1) == ErrorCode.ILLEGAL_GENERATION
    assert co.heartbeat("g", 1, "nobody", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert co.heartbeat("other", 1, a_id, None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert co.heartbeat("", 1, a_id, None, 1) == ErrorCode.INVALID_GROUP_ID


def test_member_that_stops_heartbeating_is_expelled_and_the_rest_rebalance() -> None:
    co, _ = make()
    a_id = join(co, 0, client="a").one.member_id
    b = join(co, 1, client="b")
    join(co, 2, a_id, client="a")
    b_id = b.one.member_id
    gen = co.groups["g"].generation
    sync(co, 3, b_id, gen)
    sync(co, 3, co.groups["g"].leader_id or "", gen, {a_id: b"1", b_id: b"2"})
    assert co.groups["g"].state is S.STABLE
    for t in range(1000, SESSION + 3, 1000):
        assert co.heartbeat("g", gen, a_id, None, t) == ErrorCode.NONE
        co.tick(t)
    co.tick(SESSION + 4)  # b's last sign of life was at 3
    assert b_id not in co.groups["g"].members
    assert co.groups["g"].state is S.PREPARING_REBALANCE
    assert co.heartbeat("g", gen, a_id, None, SESSION + 5) == ErrorCode.REBALANCE_IN_PROGRESS
    a = join(co, SESSION + 6, a_id, client="a")
    assert a.one.generation == gen + 1 and [m.member_id for m in a.one.members] == [a_id]


def test_session_timeout_bounds() -> None:
    co, _ = make(min_session_timeout_ms=6000, max_session_timeout_ms=300_000)
    assert join(co, 0, session=5999).one.error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(co, 0, session=300_001).one.error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert "g" not in co.groups


def test_group_max_size() -> None:
    co, _ = make(max_size=1)
    join(co, 0, client="a")
    assert join(co, 1, client="b").one.error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_inconsistent_protocols_are_refused() -> None:
    co, _ = make()
    join(co, 0, client="a", protocols=[("range", b"")])
    assert join(co, 1, client="b", protocols=[("roundrobin", b"")]).one.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(co, 1, client="b", protocol_type="connect").one.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(co, 1, group="h", protocols=[]).one.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_choice_is_one_every_member_supports_by_vote() -> None:
    co, _ = make()
    a_id = join(co, 0, client="a", protocols=[("cooperative", b""), ("range", b"")]).one.member_id
    b = join(co, 1, client="b", protocols=[("range", b""), ("roundrobin", b"")])
    join(co, 2, a_id, client="a", protocols=[("cooperative", b""), ("range", b"")])
    assert b.one.protocol_name == "range"


# -- leave -----------------------------------------------------------------------------------------

def test_leave_removes_members_and_rebalances_the_rest() -> None:
    co, _ = make()
    a_id = join(co, 0, client="a").one.member_id
    b = join(co, 1, client="b")
    join(co, 2, a_id, client="a")
    b_id = b.one.member_id
    error, codes = co.leave("g", [(b_id, None), ("ghost", None)], 3)
    assert error == ErrorCode.NONE and codes == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert co.groups["g"].state is S.PREPARING_REBALANCE
    assert co.leave("nope", [(a_id, None)], 3)[0] == ErrorCode.UNKNOWN_MEMBER_ID


def test_last_member_leaving_empties_the_group() -> None:
    co, log = make()
    a_id = join(co, 0).one.member_id
    sync(co, 0, a_id, 1, {a_id: b""})
    co.leave("g", [(a_id, None)], 5)
    group = co.groups["g"]
    assert group.state is S.EMPTY and group.generation == 2 and not group.members
    record = log.decoded()[-1]
    assert isinstance(record, GroupRecord) and record.value is not None and record.value.members == []


# -- static membership -----------------------------------------------------------------------------

def test_static_member_rejoining_keeps_its_assignment_without_rebalance_and_fences_the_old_id() -> None:
    co, _ = make()
    a = join(co, 0, client="a", instance="i-a").one
    b = join(co, 1, client="b", instance="i-b")
    join(co, 2, a.member_id, client="a", instance="i-a")
    gen = co.groups["g"].generation
    b_id = b.one.member_id
    leader = co.groups["g"].leader_id
    assert leader is not None
    for m in co.groups["g"].members:
        if m != leader:
            sync(co, 3, m, gen)
    sync(co, 3, leader, gen, {a.member_id: b"A", b_id: b"B"})
    assert co.groups["g"].state is S.STABLE
    # b restarts: it comes back without a member id but with its instance id
    again = join(co, 4, client="b", instance="i-b").one
    assert again.error == ErrorCode.NONE and again.member_id != b_id and again.generation == gen
    assert co.groups["g"].state is S.STABLE
    assert sync(co, 5, again.member_id, gen).one.assignment == b"B"
    assert co.heartbeat("g", gen, b_id, "i-b", 6) == ErrorCode.FENCED_INSTANCE_ID
    _, codes = co.leave("g", [(b_id, "i-b")], 7)
    assert codes == [ErrorCode.FENCED_INSTANCE_ID]


# -- offsets ---------------------------------------------------------------------------------------

def commit(co: GroupCoordinator, now: int, *offsets: tuple[str, int, int], group: str = "g", generation: int = -1,
           member: str = "", metadata: str | None = "m") -> dict[tuple[str, int], ErrorCode]:
    box = Box()
    co.commit_offsets(CommitRequest(group, generation, member, None,
                                    [OffsetToCommit(t, p, o, 5, metadata) for t, p, o in offsets]), now, box)
    return box.one


def test_simple_consumer_commits_and_reads_back_exactly() -> None:
    co, log = make()
    assert commit(co, 7, ("t", 0, 42), ("t", 1, 7)) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    error, found = co.fetch_offsets("g", [("t", 0), ("t", 2)])
    assert error == ErrorCode.NONE
    assert found[("t", 0)] is not None and (found[("t", 0)].offset, found[("t", 0)].metadata) == (42, "m")
    assert found[("t", 2)] is None
    records = log.decoded()
    assert all(isinstance(r, OffsetRecord) for r in records)
    assert {(r.topic, r.partition, r.value.offset, r.value.leader_epoch) for r in records} == {
        ("t", 0, 42, 5), ("t", 1, 7, 5)}


def test_commit_is_visible_only_after_its_write_completes() -> None:
    co, log = make()
    log.hold = True
    box = Box()
    co.commit_offsets(CommitRequest("g", -1, "", None, [OffsetToCommit("t", 0, 1, -1, None)]), 0, box)
    assert not box.answered and co.fetch_offsets("g", [("t", 0)])[1][("t", 0)] is None
    log.release()
    assert box.one == {("t", 0): ErrorCode.NONE}
    assert co.fetch_offsets("g", None)[1][("t", 0)] is not None


def test_commit_rules_for_group_members() -> None:
    co, _ = make()
    a_id = join(co, 0).one.member_id
    assert commit(co, 1, ("t", 0, 1), generation=1, member=a_id)[("t", 0)] == ErrorCode.REBALANCE_IN_PROGRESS
    sync(co, 1, a_id, 1, {a_id: b""})
    assert commit(co, 2, ("t", 0, 1), generation=1, member=a_id)[("t", 0)] == ErrorCode.NONE
    assert commit(co, 2, ("t", 0, 1), generation=0, member=a_id)[("t", 0)] == ErrorCode.ILLEGAL_GENERATION
    assert commit(co, 2, ("t", 0, 1), generation=1, member="x")[("t", 0)] == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(co, 2, ("t", 0, 1))[("t", 0)] == ErrorCode.UNKNOWN_MEMBER_ID  # not while it has members
    assert commit(co, 2, ("t", 0, 1), group="new", generation=3)[("t", 0)] == ErrorCode.ILLEGAL_GENERATION
    assert commit(co, 2, ("t", 0, 1), metadata="x" * 5000)[("t", 0)] == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(co, 2, ("t", 0, 1), group="s", metadata="x" * 4097)[("t", 0)] == ErrorCode.OFFSET_METADATA_TOO_LARGE


def test_unknown_partitions_are_refused() -> None:
    log = FakeLog()
    co = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), log,
                          partition_exists=lambda topic, partition: topic == "t" and partition < 2)
    assert commit(co, 0, ("t", 0, 1), ("t", 2, 1), ("u", 0, 1)) == {
        ("t", 0): ErrorCode.NONE, ("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_offsets_of_an_empty_group_expire_after_retention_and_the_group_goes() -> None:
    co, log = make(offsets_retention_ms=1000)
    commit(co, 0, ("t", 0, 1))
    co.expire_offsets(999)
    assert co.fetch_offsets("g", None)[1]
    co.expire_offsets(1000)
    assert "g" not in co.groups
    tail = log.decoded()[-2:]
    assert isinstance(tail[0], OffsetRecord) and tail[0].value is None
    assert isinstance(tail[1], GroupRecord) and tail[1].value is None


def test_delete_groups_and_offsets() -> None:
    co, log = make()
    commit(co, 0, ("t", 0, 1), ("t", 1, 2), group="empty")
    a_id = join(co, 0, group="busy").one.member_id
    box = Box()
    co.delete_groups(["empty", "busy", "missing"], 1, box)
    assert box.one == {"empty": ErrorCode.NONE, "busy": ErrorCode.NON_EMPTY_GROUP,
                       "missing": ErrorCode.GROUP_ID_NOT_FOUND}
    assert "empty" not in co.groups and a_id in co.groups["busy"].members
    tombstones = [r for r in log.decoded() if r.group == "empty" and r.value is None]
    assert len(tombstones) == 3  # two offsets and the group


def test_offset_delete_refuses_subscribed_topics_of_live_consumer_groups() -> None:
    from pybroker.protocol.messages.consumer_protocol import ConsumerProtocolSubscription

    subscription = (1).to_bytes(2, "big") + ConsumerProtocolSubscription(topics=["t"]).encode(1)
    co, _ = make()
    a_id = join(co, 0, protocols=[("range", subscription)]).one.member_id
    sync(co, 0, a_id, 1, {a_id: b""})
    commit(co, 1, ("t", 0, 1), ("u", 0, 1), generation=1, member=a_id)
    results: list[Any] = []
    co.delete_offsets("g", [("t", 0), ("u", 0)], 2, lambda e, c: results.append((e, c)))
    assert results == [(ErrorCode.NONE, {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): ErrorCode.NONE})]
    assert set(co.fetch_offsets("g", None)[1]) == {("t", 0)}
    co.delete_offsets("nope", [("t", 0)], 2, lambda e, c: results.append((e, c)))
    assert results[-1] == (ErrorCode.GROUP_ID_NOT_FOUND, {})


# -- loading ---------------------------------------------------------------------------------------

def test_groups_of_a_loading_partition_answer_load_in_progress_then_come_back_stable() -> None:
    co, log = make()
    a_id = join(co, 0).one.member_id
    sync(co, 0, a_id, 1, {a_id: b"mine"})
    commit(co, 1, ("t", 0, 9), generation=1, member=a_id)
    records = log.decoded()

    restarted, _ = make()
    partition = restarted.partition_for("g")
    restarted.begin_loading([partition])
    assert restarted.heartbeat("g", 1, a_id, None, 5) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert join(restarted, 5).one.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    groups = {r.group: r.value for r in records if isinstance(r, GroupRecord)}
    offsets = {"g": {(r.topic, r.partition): committed_offset(r.value, i) for i, r in enumerate(records)
                     if isinstance(r, OffsetRecord) and r.value is not None}}
    restarted.finish_loading(partition, groups, offsets, 100)
    assert restarted.groups["g"].state is S.STABLE
    assert restarted.heartbeat("g", 1, a_id, None, 101) == ErrorCode.NONE
    assert sync(restarted, 102, a_id, 1).one.assignment == b"mine"
    assert restarted.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 9  # type: ignore[union-attr]
    # nobody heartbeats after the restart: the member expires and the group empties
    restarted.tick(102 + SESSION)
    restarted.tick(102 + SESSION + 1)
    assert restarted.groups["g"].state is S.EMPTY


def test_shutdown_answers_every_waiting_request() -> None:
    co, _ = make(initial_delay=3000)
    box = join(co, 0)
    co.shutdown()
    assert box.one.error == ErrorCode.NOT_COORDINATOR
