"""Random lives of transactional ids: whatever producers do, however time passes and whenever the broker
restarts, Kafka's promises hold.

Checked after every step:
- every state written to `__transaction_state` follows the state table from the id's previous one, and
  PrepareEpochFence is never written;
- for one producer id, the epoch never goes back;
- an Ongoing transaction has partitions and a start time; Empty and Complete states have none;
- every marker belongs to the transaction whose Prepare record (same producer id, epoch and outcome) was
  the last one written for that producer id before it, and names only that transaction's partitions;
- a request is accepted only from the identity last handed out for the id (older producers are fenced);
- once the background work settles, nothing is left prepared and no open transaction outlives its timeout
  (two-phase transactions have none);
- a transaction handed over with keep_prepared_txn keeps its producer id and epoch, and only the client
  it was handed to may end it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pybroker.broker.transactions.coordinator import TransactionCoordinator, TxnConfig
from pybroker.broker.transactions.metadata import TV_1, TV_2, TxnMetadata
from pybroker.broker.transactions.state_machine import TRANSITIONS, TxnState
from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.transactions.txn_fakes import Clock, FakeMarkers, FakeTxnLog

IDS = ["a", "b"]
PRODUCERS = [0, 1]
PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
S = TxnState
ALLOWED = {(before, after) for (before, _), after in TRANSITIONS.items()}


class TxnLife(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.log = FakeTxnLog()
        self.markers = FakeMarkers()
        self.events: list[tuple[str, Any]] = []
        self.log.events = self.markers.events = self.events
        self.clock = Clock()
        self.ids = itertools.count(1)
        self.co = self._coordinator()
        #: (id, producer slot) -> the (producer id, epoch) that client holds
        self.clients: dict[tuple[str, int], tuple[int, int]] = {}
        #: id -> the identity last handed out
        self.latest: dict[str, tuple[int, int]] = {}
        self.checked = 0
        self.last_state: dict[str, TxnMetadata | None] = {}
        self.epochs: dict[int, int] = {}
        #: producer id -> its last Prepare record
        self.prepared: dict[int, TxnMetadata] = {}

    def _coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(TxnConfig(num_partitions=3, max_timeout_ms=10_000, id_expiration_ms=50_000,
                                                two_phase_commit_enabled=True),
                                      self.log, self.markers, new_producer_id=lambda: next(self.ids),
                                      clock_ms=self.clock)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.co.shutdown())
        self.loop.close()

    def _accepted(self, txn_id: str, slot: int) -> None:
        assert self.clients.get((txn_id, slot)) == self.latest.get(txn_id), "a fenced producer was accepted"

    # -- producers --------------------------------------------------------------------------------------
    @rule(txn_id=st.sampled_from(IDS), slot=st.sampled_from(PRODUCERS), kip360=st.booleans(),
          timeout=st.sampled_from([1000, 5000, 20_000]), two_phase=st.booleans(), keep=st.booleans())
    def init(self, txn_id: str, slot: int, kip360: bool, timeout: int, two_phase: bool, keep: bool) -> None:
        held = self.clients.get((txn_id, slot))
        pid, epoch = held if kip360 and held else (-1, -1)
        result = self.run(self.co.init_producer_id(txn_id, timeout, pid, epoch, enable_2pc=two_phase,
                                                   keep_prepared=keep))
        if timeout > 10_000 and not two_phase:
            assert result.error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
            return
        assert result.error in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.PRODUCER_FENCED)
        if result.error is ErrorCode.NONE:
            if result.ongoing_producer_id >= 0:
                meta = self.co.get(txn_id)
                assert meta is not None and meta.state is S.ONGOING
                assert (meta.producer_id, meta.producer_epoch) == (result.ongoing_producer_id,
                                                                   result.ongoing_producer_epoch)
            identity = (result.producer_id, result.producer_epoch)
            self.clients[(txn_id, slot)] = identity
            self.latest[txn_id] = identity

    @rule(txn_id=st.sampled_from(IDS), slot=st.sampled_from(PRODUCERS),
          parts=st.sets(st.sampled_from(PARTITIONS), min_size=1, max_size=2))
    def add(self, txn_id: str, slot: int, parts: set[tuple[str, int]]) -> None:
        pid, epoch = self.clients.get((txn_id, slot), (7, 0))
        code = self.run(self.co.add_partitions(txn_id, pid, epoch, frozenset(parts), TV_1))
        if code is ErrorCode.NONE:
            self._accepted(txn_id, slot)

    @rule(txn_id=st.sampled_from(IDS), slot=st.sampled_from(PRODUCERS), part=st.sampled_from(PARTITIONS),
          version=st.sampled_from([9, 11, 12]))
    def produce(self, txn_id: str, slot: int, part: tuple[str, int], version: int) -> None:
        pid, epoch = self.clients.get((txn_id, slot), (7, 0))
        verdict = self.co.check_produce(txn_id, pid, epoch, *part, version)
        code = verdict if isinstance(verdict, ErrorCode) else self.run(verdict)
        if code is ErrorCode.NONE:
            self._accepted(txn_id, slot)
            meta = self.co.get(txn_id)
            assert meta is not None and meta.state is S.ONGOING and part in meta.partitions

    @rule(txn_id=st.sampled_from(IDS), slot=st.sampled_from(PRODUCERS), commit=st.booleans(), v2=st.booleans())
    def end(self, txn_id: str, slot: int, commit: bool, v2: bool) -> None:
        pid, epoch = self.clients.get((txn_id, slot), (7, 0))
        result = self.run(self.co.end_txn(txn_id, pid, epoch, commit, TV_2 if v2 else TV_1))
        if result.error is ErrorCode.NONE:
            self._accepted(txn_id, slot)
            if v2:
                identity = (result.producer_id, result.producer_epoch)
                self.clients[(txn_id, slot)] = identity
                self.latest[txn_id] = identity

    # -- time, background work, restarts ------------------------------------------------------------------
    @rule(ms=st.integers(0, 25_000))
    def time_passes(self, ms: int) -> None:
        self.clock.now += ms
        self.run(self.co.abort_timed_out())
        self.run(self.co.expire_idle())

    @rule()
    def settle(self) -> None:
        self.run(self.co.wait_idle())
        for entry in self.co.entries.values():
            assert not entry.meta.state.is_prepared, "a prepared transaction was never completed"
        self.run(self.co.abort_timed_out())
        self.run(self.co.wait_idle())
        for entry in self.co.entries.values():
            assert not entry.meta.timed_out(self.clock.now), "an open transaction outlived its timeout"

    @precondition(lambda self: bool(self.log.records))
    @rule()
    def restart(self) -> None:
        self.run(self.co.shutdown())
        self.co = self._coordinator()
        self.co.begin_loading(range(3))
        replayed = self.log.replay()
        for partition in range(3):
            self.co.finish_loading(partition, {t: m for t, m in replayed.items()
                                               if self.co.partition_for(t) == partition})

    # -- the promises -------------------------------------------------------------------------------------
    @invariant()
    def history_keeps_the_promises(self) -> None:
        """Records and markers in the order they happened."""
        for kind, event in self.events[self.checked:]:
            if kind == "record":
                self._record(*event)
            else:
                self._markers(*event)
        self.checked = len(self.events)

    def _record(self, _partition: int, txn_id: str, meta: TxnMetadata | None) -> None:
        before = self.last_state.get(txn_id)
        self.last_state[txn_id] = meta
        if meta is None:
            return
        assert meta.state is not S.PREPARE_EPOCH_FENCE
        if before is not None:
            assert (before.state, meta.state) in ALLOWED or \
                (before.state is S.ONGOING and meta.state is S.PREPARE_ABORT), \
                f"{before.state.value} -> {meta.state.value}"
            if before.state.is_prepared:
                assert meta.state is {S.PREPARE_COMMIT: S.COMPLETE_COMMIT,
                                      S.PREPARE_ABORT: S.COMPLETE_ABORT}[before.state], "the outcome changed"
        if meta.producer_id in self.epochs:
            assert meta.producer_epoch >= self.epochs[meta.producer_id], "an epoch went back"
        self.epochs[meta.producer_id] = meta.producer_epoch
        if meta.state.is_prepared:
            self.prepared[meta.producer_id] = meta
        if meta.state is S.ONGOING:
            assert meta.partitions and meta.start_ms >= 0
        if meta.state.is_complete:
            assert not meta.partitions

    def _markers(self, pid: int, epoch: int, _coordinator_epoch: int, commit: bool,
                 parts: list[tuple[str, int]]) -> None:
        prepared = self.prepared.get(pid)
        assert prepared is not None, "a marker without a Prepare record"
        assert (prepared.producer_epoch, prepared.state is S.PREPARE_COMMIT) == (epoch, commit), \
            "a marker of another transaction than the last prepared one"
        assert set(parts) <= prepared.partitions


TxnLife.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
test_transaction_coordinator_life = TxnLife.TestCase
