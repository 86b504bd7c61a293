"""A transaction coordinator over fakes: a state log kept in memory and a marker writer that records."""

from __future__ import annotations

import asyncio
import itertools

from pybroker.broker.transactions.coordinator import TransactionCoordinator, TxnConfig
from pybroker.broker.transactions.metadata import TopicPartition, TxnMetadata
from pybroker.protocol.errors import ErrorCode


class FakeTxnLog:
    """Every write lands in `records`; `fail_with` fails the next writes; `gate` holds them until set."""

    def __init__(self) -> None:
        self.records: list[tuple[int, str, TxnMetadata | None]] = []
        self.fail_with: ErrorCode | None = None
        self.gate: asyncio.Event | None = None
        #: when set, every write is also appended here (shared with a FakeMarkers: one ordered history)
        self.events: list[tuple[str, object]] | None = None

    async def write(self, partition: int, transactional_id: str, meta: TxnMetadata | None) -> ErrorCode:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            return self.fail_with
        self.records.append((partition, transactional_id, meta))
        if self.events is not None:
            self.events.append(("record", (partition, transactional_id, meta)))
        return ErrorCode.NONE

    def last(self, transactional_id: str) -> TxnMetadata | None:
        return next(m for _, t, m in reversed(self.records) if t == transactional_id)

    def replay(self) -> dict[str, TxnMetadata | None]:
        """What a restart would load: the last record per id."""
        return {t: m for _, t, m in self.records}


class FakeMarkers:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int, bool, list[TopicPartition]]] = []
        self.fail: dict[TopicPartition, ErrorCode] = {}
        self.events: list[tuple[str, object]] | None = None

    async def __call__(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                       partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        self.calls.append((producer_id, producer_epoch, coordinator_epoch, commit, list(partitions)))
        if self.events is not None:
            self.events.append(("markers", self.calls[-1]))
        return {tp: self.fail.pop(tp, ErrorCode.NONE) for tp in partitions}


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_coordinator(**config: object) -> tuple[TransactionCoordinator, FakeTxnLog, FakeMarkers, Clock]:
    txn_log, markers, clock = FakeTxnLog(), FakeMarkers(), Clock()
    ids = itertools.count(1000)
    settings = {"num_partitions": 5, **config}
    coordinator = TransactionCoordinator(TxnConfig(**settings), txn_log, markers,  # type: ignore[arg-type]
                                         new_producer_id=lambda: next(ids), clock_ms=clock)
    return coordinator, txn_log, markers, clock
