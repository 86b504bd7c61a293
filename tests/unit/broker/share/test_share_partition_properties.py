"""The share-partition state machine against a model of KIP-932's delivery rules.

The model keeps every offset the log ever held, with its state, delivery count, holder and lock deadline,
and never forgets one; the machine under test keeps only what is in flight. Rules: the log grows, members
acquire (at most `max_records`, never past the cap on records in flight), acknowledge (accept, release,
reject, renew, gap; possibly a record they do not hold, which must change nothing), locks time out, a
member leaves, and the broker restarts from the durable form. After every step the two must agree on every
offset, and the start offset must be the first offset not yet done.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pybroker.broker.share.share_partition import AckType, RecordState, SharePartition
from pybroker.protocol.errors import ErrorCode

LOCK_MS = 1000
LIMIT = 3
CAP = 12
MEMBERS = st.sampled_from(["m1", "m2", "m3"])


@dataclass
class Slot:
    state: RecordState = RecordState.AVAILABLE
    count: int = 0
    member: str | None = None
    deadline: int = 0


class ShareLife(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.log_end = 0
        self.model: dict[int, Slot] = {}
        self.partition = SharePartition(0, lock_duration_ms=LOCK_MS, delivery_count_limit=LIMIT, max_in_flight=CAP)
        self.handed_out = 0  # the model's end offset

    # -- the model's rules --------------------------------------------------------------------------

    def _start(self) -> int:
        offset = 0
        while offset < self.handed_out and self.model[offset].state in (RecordState.ACKNOWLEDGED,
                                                                         RecordState.ARCHIVED):
            offset += 1
        return offset

    def _release(self, slot: Slot) -> None:
        slot.member = None
        slot.state = RecordState.ARCHIVED if slot.count >= LIMIT else RecordState.AVAILABLE

    # -- steps --------------------------------------------------------------------------------------

    @rule(n=st.integers(1, 6))
    def produce(self, n: int) -> None:
        self.log_end += n

    @rule(member=MEMBERS, max_records=st.integers(1, 8))
    def acquire(self, member: str, max_records: int) -> None:
        got = self.partition.acquire(member, self.log_end, max_records, self.now)
        expected: list[tuple[int, int]] = []
        for offset in range(self._start(), self.handed_out):
            slot = self.model[offset]
            if len(expected) < max_records and slot.state is RecordState.AVAILABLE:
                expected.append((offset, slot.count + 1))
        start = self._start()
        while len(expected) < max_records and self.handed_out < self.log_end and self.handed_out - start < CAP:
            self.model[self.handed_out] = Slot()
            expected.append((self.handed_out, 1))
            self.handed_out += 1
        for offset, count in expected:
            slot = self.model[offset]
            slot.state, slot.count, slot.member, slot.deadline = RecordState.ACQUIRED, count, member, self.now + LOCK_MS
        flat = [(o, a.delivery_count) for a in got for o in range(a.first_offset, a.last_offset + 1)]
        assert flat == expected
        assert sum(a.last_offset - a.first_offset + 1 for a in got) <= max_records

    @rule(member=MEMBERS, first=st.integers(0, 40), length=st.integers(1, 4),
          kinds=st.lists(st.sampled_from(list(AckType)), min_size=1, max_size=4), one=st.booleans())
    def acknowledge(self, member: str, first: int, length: int, kinds: list[AckType], one: bool) -> None:
        types = [int(kinds[0])] if one else [int(k) for k in (kinds * 4)[:length]]
        last = first + length - 1
        held = all(o in self.model and self.model[o].state is RecordState.ACQUIRED and self.model[o].member == member
                   for o in range(first, last + 1))
        code = self.partition.acknowledge(member, first, last, types, self.now)
        if not held:
            assert code is ErrorCode.INVALID_RECORD_STATE
            return
        assert code is ErrorCode.NONE
        for i, offset in enumerate(range(first, last + 1)):
            kind = AckType(types[0] if len(types) == 1 else types[i])
            slot = self.model[offset]
            if kind is AckType.RENEW:
                slot.deadline = self.now + LOCK_MS
            elif kind is AckType.RELEASE:
                self._release(slot)
            else:
                slot.member = None
                slot.state = RecordState.ACKNOWLEDGED if kind is AckType.ACCEPT else RecordState.ARCHIVED

    @rule(ms=st.integers(1, 2 * LOCK_MS))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.partition.expire_locks(self.now)
        for slot in self.model.values():
            if slot.state is RecordState.ACQUIRED and slot.deadline <= self.now:
                self._release(slot)

    @rule(member=MEMBERS)
    def member_leaves(self, member: str) -> None:
        self.partition.release_member(member)
        for slot in self.model.values():
            if slot.state is RecordState.ACQUIRED and slot.member == member:
                self._release(slot)

    @rule()
    def restart(self) -> None:
        """A crash: only the durable form survives; what was acquired comes back available, counted."""
        self.partition = SharePartition.restore(
            self.partition.start_offset, self.partition.state_batches(), lock_duration_ms=LOCK_MS,
            delivery_count_limit=LIMIT, max_in_flight=CAP)
        for slot in self.model.values():
            if slot.state is RecordState.ACQUIRED:
                self._release(slot)
        # the durable form ends at its last batch: offsets after it are new again (none exist here, since
        # every handed-out offset is in flight or below the start offset)

    # -- what must hold -----------------------------------------------------------------------------

    @invariant()
    def agrees(self) -> None:
        p = self.partition
        assert p.start_offset == self._start()
        assert p.end_offset == max(self.handed_out, p.start_offset)
        assert p.end_offset - p.start_offset <= CAP
        for offset in range(p.start_offset, p.end_offset):
            mine, model = p.records[offset], self.model[offset]
            assert (mine.state, mine.delivery_count, mine.member) == (model.state, model.count, model.member)
            assert mine.delivery_count <= LIMIT

    @invariant()
    def durable_form_round_trips(self) -> None:
        p = self.partition
        again = SharePartition.restore(p.start_offset, p.state_batches(), lock_duration_ms=LOCK_MS,
                                       delivery_count_limit=LIMIT, max_in_flight=CAP)
        assert again.start_offset >= p.start_offset
        for offset in range(p.start_offset, p.end_offset):
            state = p.records[offset].state
            count = p.records[offset].delivery_count
            if state in (RecordState.ACQUIRED, RecordState.AVAILABLE):
                state = RecordState.ARCHIVED if count >= LIMIT else RecordState.AVAILABLE
            if offset >= again.start_offset:
                assert again.records[offset].state is state


ShareLife.TestCase.settings = settings(max_examples=150, stateful_step_count=40)
TestShareLife = ShareLife.TestCase


def test_acquire_honours_up_to_and_the_cap() -> None:
    p = SharePartition(5, lock_duration_ms=10, delivery_count_limit=2, max_in_flight=4)
    got = p.acquire("a", log_end=100, max_records=10, now_ms=0, up_to=6)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(5, 6, 1)]
    got = p.acquire("b", log_end=100, max_records=10, now_ms=0)
    assert [(a.first_offset, a.last_offset) for a in got] == [(7, 8)]  # the cap of 4 in flight
    assert p.acquire("b", log_end=100, max_records=10, now_ms=0) == []


def test_a_record_past_its_delivery_limit_is_archived() -> None:
    p = SharePartition(0, lock_duration_ms=10, delivery_count_limit=2, max_in_flight=10)
    p.acquire("a", 1, 1, 0)
    assert p.acknowledge("a", 0, 0, [int(AckType.RELEASE)], 1) is ErrorCode.NONE
    p.acquire("a", 1, 1, 2)
    assert p.expire_locks(100) == 1
    assert p.start_offset == 1 and p.records == {}


def test_bad_acknowledgements_are_refused() -> None:
    p = SharePartition(0, lock_duration_ms=10, delivery_count_limit=2, max_in_flight=10)
    p.acquire("a", 3, 3, 0)
    assert p.acknowledge("a", 2, 0, [1], 0) is ErrorCode.INVALID_REQUEST
    assert p.acknowledge("a", 0, 2, [1, 1], 0) is ErrorCode.INVALID_REQUEST
    assert p.acknowledge("a", 0, 2, [9], 0) is ErrorCode.INVALID_REQUEST
    assert p.acknowledge("b", 0, 2, [1], 0) is ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("a", 0, 3, [1], 0) is ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("a", 0, 2, [1], 0) is ErrorCode.NONE and p.start_offset == 3
