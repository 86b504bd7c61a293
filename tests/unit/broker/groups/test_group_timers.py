"""The group coordinator's timers do exactly what a scan of every group on every tick did.

A differential state machine: two coordinators get the same requests, write completions and passing
time; one ticks with its timer heap (the real `tick`), the other scans every group as the coordinator
used to. Every answer, every write and every group's state must be the same after every step, and the
heap must never hold a group's entry later than the first time a scan would act on it. Then a few direct
checks: idle groups are not visited, and the timer learns when a deadline moves earlier.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pybroker.broker.groups import classic_groups
from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.groups.coordinator import GroupCoordinator
from pybroker.broker.groups.outcomes import CommitRequest, JoinRequest, OffsetToCommit, SyncRequest
from tests.unit.broker.groups.test_group_coordinator import FakeLog

CLIENTS = ["a", "b", "c"]
GROUPS = ["g1", "g2", "g3"]


class ScanningCoordinator(GroupCoordinator):
    """The reference: every group looked at on every tick, whatever its deadlines."""

    def tick(self, now: int) -> None:
        for group in list(self.groups.values()):
            self._tick_group(group, now)


def _pair() -> tuple[tuple[GroupCoordinator, FakeLog, list[Any]], ...]:
    sides = []
    for cls in (GroupCoordinator, ScanningCoordinator):
        ids = iter(range(1, 1_000_000))
        fake = FakeLog()
        co = cls(GroupConfig(initial_rebalance_delay_ms=3000, num_partitions=2), fake,
                 new_member_id=lambda client, ids=ids: f"{client}-{next(ids)}")  # type: ignore[misc]
        sides.append((co, fake, []))
    return tuple(sides)


def _state(co: GroupCoordinator) -> Any:
    return sorted(
        (g.group_id, g.state.value, g.generation, g.leader_id, g.join_deadline_ms, g.sync_deadline_ms,
         sorted(g.pending_members.items()),
         sorted((m.member_id, m.last_heartbeat_ms, m.session_timeout_ms, m.join_waiter is None,
                 m.sync_waiter is None, m.assignment) for m in g.members.values()))
        for g in co.groups.values())


class TimersMatchTheScan(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sides = _pair()
        self.now = 0
        self.known: dict[tuple[str, str], str] = {}

    def _each(self, action: Any) -> None:
        for co, fake, answers in self.sides:
            action(co, fake, lambda name, answers=answers: (lambda outcome: answers.append((name, outcome))))

    @rule(group=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS), use_known=st.booleans(),
          v4=st.booleans(), session=st.sampled_from([6000, 10_000, 400_000]),
          rebalance=st.sampled_from([5000, 20_000]))
    def join(self, group: str, client: str, use_known: bool, v4: bool, session: int, rebalance: int) -> None:
        member = self.known.get((group, client), "") if use_known else ""
        self._each(lambda co, fake, waiter: co.join(
            JoinRequest(group, member, None, client, "/h", session, rebalance, "consumer", [("range", b"")], v4),
            self.now, waiter("join")))
        for name, outcome in self.sides[0][2]:
            if name == "join" and outcome.member_id.startswith(client):
                self.known[(group, client)] = outcome.member_id

    @rule(group=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS), hold=st.booleans())
    def sync(self, group: str, client: str, hold: bool) -> None:
        def act(co: GroupCoordinator, fake: FakeLog, waiter: Any) -> None:
            g = co.groups.get(group)
            generation = g.generation if g else 0
            assignments = {m: m.encode() for m in g.members} if g else {}
            fake.hold = hold
            co.sync(SyncRequest(group, generation, self.known.get((group, client), "x"), None, None, None,
                                assignments), self.now, waiter("sync"))
            fake.hold = False
        self._each(act)

    @rule(code=st.sampled_from([0, 15]))
    def release_writes(self, code: int) -> None:
        from pybroker.protocol.errors import ErrorCode

        self._each(lambda co, fake, waiter: fake.release(ErrorCode(code)))

    @rule(group=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def heartbeat(self, group: str, client: str) -> None:
        def act(co: GroupCoordinator, fake: FakeLog, waiter: Any) -> None:
            g = co.groups.get(group)
            waiter("heartbeat")(co.heartbeat(group, g.generation if g else 0, self.known.get((group, client), "x"),
                                             None, self.now))
        self._each(act)

    @rule(group=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def leave(self, group: str, client: str) -> None:
        self._each(lambda co, fake, waiter: waiter("leave")(
            co.leave(group, [(self.known.get((group, client), "x"), None)], self.now)))

    @rule(group=st.sampled_from(GROUPS))
    def commit_outside_the_group(self, group: str) -> None:
        self._each(lambda co, fake, waiter: co.commit_offsets(
            CommitRequest(group, -1, "", None, [OffsetToCommit("t", 0, 5, -1, None)]), self.now,
            waiter("commit")))

    @rule(group=st.sampled_from(GROUPS))
    def delete(self, group: str) -> None:
        self._each(lambda co, fake, waiter: co.delete_groups([group], self.now, waiter("delete")))

    @rule(ms=st.sampled_from([0, 1, 999, 2999, 3000, 5000, 6000, 9999, 20_000, 300_000]))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self._each(lambda co, fake, waiter: co.tick(self.now))

    @invariant()
    def both_sides_agree(self) -> None:
        (ours, our_log, our_answers), (ref, ref_log, ref_answers) = self.sides
        assert [(n, repr(o)) for n, o in our_answers] == [(n, repr(o)) for n, o in ref_answers]
        assert our_log.written == ref_log.written
        assert _state(ours) == _state(ref)

    @invariant()
    def no_group_is_timed_later_than_its_first_deadline(self) -> None:
        co = self.sides[0][0]
        for group in co.groups.values():
            deadline = classic_groups.deadline_of(group)
            if deadline is not None:
                assert co.timers.scheduled.get(group.group_id, deadline + 1) <= deadline, group.group_id


TestTimersMatchTheScan = TimersMatchTheScan.TestCase
TestTimersMatchTheScan.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)


def _join(co: GroupCoordinator, group: str, now: int, answers: list[Any]) -> None:
    co.join(JoinRequest(group, "", None, "c", "/h", 10_000, 20_000, "consumer", [("range", b"")], False),
            now, answers.append)


def test_a_tick_visits_only_groups_whose_deadline_is_due() -> None:
    co = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), FakeLog())
    answers: list[Any] = []
    for i in range(50):
        _join(co, f"g{i}", 0, answers)  # each completes its join at once: Stable, session until 10,000
    visited: list[str] = []
    real = co._tick_group
    co._tick_group = lambda group, now: (visited.append(group.group_id), real(group, now))[1]  # type: ignore[method-assign]
    for now in range(100, 9_900, 100):
        co.tick(now)
    assert visited == []
    assert co.next_deadline() == 10_000
    co.heartbeat("g7", 1, answers[7].member_id, None, 9_000)
    co.tick(10_000)
    assert len(visited) == 50  # all due; g7's entry finds its session moved on
    assert set(co.groups["g7"].members) and all(not g.members for k, g in co.groups.items() if k != "g7")
    assert co.next_deadline() == 19_000


def test_the_timer_hears_of_an_earlier_deadline() -> None:
    co = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), FakeLog())
    heard: list[int] = []
    co.on_earlier_deadline = heard.append
    _join(co, "slow", 0, [])
    assert heard == [10_000]
    co.join(JoinRequest("fast", "", None, "c", "/h", 6_000, 20_000, "consumer", [("range", b"")], False), 100,
            lambda _: None)
    assert heard == [10_000, 6_100]
    _join(co, "later", 200, [])
    assert heard == [10_000, 6_100]  # not earlier than what the timer already waits for


def test_a_persisted_assignment_brings_the_sessions_back_on_time() -> None:
    """Waiting in SyncGroup keeps a member alive; once the assignment is on disk its session counts
    again, possibly long before the sync deadline the timer was last set for."""
    fake = FakeLog()
    co = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), fake)
    answers: list[Any] = []
    co.join(JoinRequest("g", "", None, "c", "/h", 6_000, 20_000, "consumer", [("range", b"")], False), 0,
            answers.append)
    member = answers[0].member_id
    fake.hold = True
    co.sync(SyncRequest("g", 1, member, None, None, None, {member: b"x"}), 100, answers.append)
    fake.hold = False
    co.tick(6_000)  # the member waits in SyncGroup: alive; the timer moves on to the sync deadline
    assert co.next_deadline() == 20_000
    fake.release()  # the assignment is durable: Stable, and the session runs from the SyncGroup at 100
    assert co.next_deadline() == 6_100
    co.tick(6_100)
    assert not co.groups["g"].members
