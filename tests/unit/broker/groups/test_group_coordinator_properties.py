"""Random lives of a group: whatever members do and whenever time passes, the coordinator's promises hold.

Promises checked after every step: each waiting request is answered at most once; generations never go
back; a Stable or CompletingRebalance group has a leader among its members; an Empty group has no
members; a successful join names a leader among the members it lists; and, once every write has
completed and every timeout has passed, no request is left waiting.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.groups.coordinator import GroupCoordinator
from pybroker.broker.groups.outcomes import JoinRequest, SyncRequest
from pybroker.broker.groups.state_machine import GroupState
from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.groups.test_group_coordinator import FakeLog

CLIENTS = ["a", "b", "c", "d"]


class Waiter:
    def __init__(self, log: list[tuple[str, Any]], name: str) -> None:
        self.log = log
        self.name = name
        self.calls = 0

    def __call__(self, outcome: Any) -> None:
        self.calls += 1
        self.log.append((self.name, outcome))


class GroupLife(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeLog()
        ids = iter(range(1, 1_000_000))
        self.co = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), self.fake,
                                   new_member_id=lambda client: f"{client}-{next(ids)}")
        self.now = 0
        self.answers: list[tuple[str, Any]] = []
        self.waiters: list[Waiter] = []
        self.known: dict[str, str] = {}  # client -> member id it was given
        self.generation_seen = 0

    def _waiter(self, name: str) -> Waiter:
        waiter = Waiter(self.answers, name)
        self.waiters.append(waiter)
        return waiter

    @rule(client=st.sampled_from(CLIENTS), use_known=st.booleans(), v4=st.booleans(),
          protocol=st.sampled_from(["range", "roundrobin"]))
    def join(self, client: str, use_known: bool, v4: bool, protocol: str) -> None:
        member = self.known.get(client, "") if use_known else ""
        waiter = self._waiter("join")
        self.co.join(JoinRequest("g", member, None, client, "/h", 6000, 20_000, "consumer",
                                 [(protocol, b""), ("range", b"")], v4), self.now, waiter)
        for name, outcome in self.answers:
            if name == "join" and outcome.member_id.startswith(client) and outcome.error in (
                    ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                self.known[client] = outcome.member_id

    @rule(client=st.sampled_from(CLIENTS), hold=st.booleans())
    def sync(self, client: str, hold: bool) -> None:
        group = self.co.groups.get("g")
        member = self.known.get(client, "x")
        generation = group.generation if group else 0
        assignments = {m: m.encode() for m in group.members} if group else {}
        self.fake.hold = hold
        self.co.sync(SyncRequest("g", generation, member, None, None, None, assignments), self.now,
                     self._waiter("sync"))
        self.fake.hold = False

    @rule()
    def release_writes(self) -> None:
        self.fake.release()

    @rule(client=st.sampled_from(CLIENTS))
    def heartbeat(self, client: str) -> None:
        group = self.co.groups.get("g")
        self.co.heartbeat("g", group.generation if group else 0, self.known.get(client, "x"), None, self.now)

    @rule(client=st.sampled_from(CLIENTS))
    def leave(self, client: str) -> None:
        self.co.leave("g", [(self.known.get(client, "x"), None)], self.now)

    @rule(ms=st.integers(0, 25_000))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.co.tick(self.now)

    @invariant()
    def answered_at_most_once(self) -> None:
        assert all(w.calls <= 1 for w in self.waiters)

    @invariant()
    def group_is_consistent(self) -> None:
        group = self.co.groups.get("g")
        if group is None:
            return
        assert group.generation >= self.generation_seen
        self.generation_seen = group.generation
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert group.members and group.leader_id in group.members
            assert group.protocol_name is not None
        if group.state is GroupState.EMPTY:
            assert not group.members
        for instance, member in group.static_members.items():
            assert group.members[member].group_instance_id == instance

    @invariant()
    def successful_joins_name_a_member_of_their_generation(self) -> None:
        for name, outcome in self.answers:
            if name == "join" and outcome.error == ErrorCode.NONE and outcome.members:
                assert outcome.leader in {m.member_id for m in outcome.members}


    def teardown(self) -> None:
        """Nobody waits forever: once writes complete and every timeout has passed, all were answered."""
        self.fake.release()
        for _ in range(4):
            self.now += 400_000
            self.co.tick(self.now)
            self.fake.release()
        assert all(w.calls == 1 for w in self.waiters), [w.name for w in self.waiters if w.calls != 1]


TestGroupLife = GroupLife.TestCase
TestGroupLife.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
