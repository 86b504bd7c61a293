"""A state model of the consumer protocol's reconciliation (KIP-848): simulated clients join, heartbeat
(sometimes losing the answer), leave, and topics grow, in any order hypothesis finds. After every step:

- no partition is held by two clients at once (what each client consumes is what its last answer said);
- in the coordinator, no partition is in two members' assigned or pending-revocation sets, and its record
  of owners agrees with the members;
- once everyone heartbeats a few rounds, the group is Stable with every partition assigned.
"""

from __future__ import annotations

import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pybroker.broker.groups.consumer_group import Assignment
from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.groups.consumer_kit import heartbeat, make

TOPIC_IDS = [uuid.UUID(int=1), uuid.UUID(int=2)]
MAX_MEMBERS = 4


class Client:
    def __init__(self, member_id: str, topics: list[str]) -> None:
        self.member_id = member_id
        self.topics = topics
        self.epoch = 0
        self.held: Assignment = {}
        self.joined = False
        #: the coordinator has a member of this id (a fenced client rejoins under the same id, and its
        #: member stays until it leaves or its session ends)
        self.known = False


class ReconciliationModel(RuleBasedStateMachine):
    @initialize(assignor=st.sampled_from(["uniform", "range"]))
    def start(self, assignor: str) -> None:
        self.co, self.log, self.table = make({"a": (TOPIC_IDS[0], 3), "b": (TOPIC_IDS[1], 2)},
                                             consumer_assignors=(assignor,))
        self.clients: dict[str, Client] = {}
        self.now = 0
        self.serial = 0

    def _apply(self, client: Client, answer: object) -> None:
        error = answer.error  # type: ignore[attr-defined]
        if error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            client.held, client.epoch, client.joined = {}, 0, False  # abandon everything, rejoin
            return
        assert error is ErrorCode.NONE, answer
        client.epoch = answer.member_epoch  # type: ignore[attr-defined]
        client.joined = client.known = True
        if answer.assignment is not None:  # type: ignore[attr-defined]
            client.held = {t: p for t, p in answer.assignment.items() if p}  # type: ignore[attr-defined]

    def _beat(self, client: Client, lose_answer: bool = False) -> None:
        self.now += 1
        if client.joined:
            answer = heartbeat(self.co, self.now, client.member_id, client.epoch, owned=client.held)
        else:
            answer = heartbeat(self.co, self.now, client.member_id, 0, topics=client.topics)
        if not lose_answer:
            self._apply(client, answer)

    @rule(topics=st.sampled_from([["a"], ["b"], ["a", "b"]]))
    def join(self, topics: list[str]) -> None:
        if len(self.clients) >= MAX_MEMBERS:
            return
        self.serial += 1
        client = Client(f"m{self.serial}", topics)
        self.clients[client.member_id] = client
        self._beat(client)

    @rule(data=st.data(), lose=st.booleans())
    def beat(self, data: st.DataObject, lose: bool) -> None:
        if self.clients:
            client = data.draw(st.sampled_from(sorted(self.clients.values(), key=lambda c: c.member_id)))
            # a lost answer to a join would leave a member the client never heard of: keep joins answered
            self._beat(client, lose_answer=lose and client.joined)

    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        if self.clients:
            client = data.draw(st.sampled_from(sorted(self.clients.values(), key=lambda c: c.member_id)))
            if client.known:  # a closing client leaves even when fenced (it has not rejoined yet)
                self.now += 1
                heartbeat(self.co, self.now, client.member_id, -1)
            del self.clients[client.member_id]

    @rule(topic=st.sampled_from(["a", "b"]))
    def grow(self, topic: str) -> None:
        topic_id, count = self.table[topic]
        if count < 6:
            self.table[topic] = (topic_id, count + 1)

    @invariant()
    def clients_never_share(self) -> None:
        seen: set[tuple[uuid.UUID, int]] = set()
        for client in self.clients.values():
            for topic, parts in client.held.items():
                for p in parts:
                    assert (topic, p) not in seen, f"{(topic, p)} held twice"
                    seen.add((topic, p))

    @invariant()
    def coordinator_never_double_assigns(self) -> None:
        group = self.co.groups.get("g")
        if group is None or group.consumer is None:
            return
        data = group.consumer
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for member in data.members.values():
            for assignment in (member.assigned, member.pending_revocation):
                for topic, parts in assignment.items():
                    for p in parts:
                        assert (topic, p) not in owners, f"{(topic, p)} owned twice"
                        owners[(topic, p)] = member.member_id
        assert owners == data.partition_owners

    def teardown(self) -> None:
        if not getattr(self, "clients", None):
            return
        for _ in range(8):
            for client in sorted(self.clients.values(), key=lambda c: c.member_id):
                self._beat(client)
        group = self.co.groups["g"]
        assert group.consumer is not None
        assert group.state_name == "Stable", (group.state_name, group.consumer.assignment_epoch, {
            m.member_id: (m.member_epoch, m.state.name, m.assigned, m.pending_revocation, group.consumer.targets.get(
                m.member_id)) for m in group.consumer.members.values()},
            {c.member_id: (c.epoch, c.held) for c in self.clients.values()})
        subscribed = {t for c in self.clients.values() for t in c.topics}
        wanted = {(self.table[t][0], p) for t in subscribed for p in range(self.table[t][1])}
        held = {(topic, p) for c in self.clients.values() for topic, parts in c.held.items() for p in parts}
        assert held == wanted


ReconciliationModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestReconciliation = ReconciliationModel.TestCase
