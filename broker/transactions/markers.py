"""Transaction markers: the commit or abort control batch written into every partition of a transaction.

`write_markers` is the one path by which a marker reaches a log: EndTxn's completion, the completion of a
transaction found prepared after a restart, and the WriteTxnMarkers API all use it. Per partition the
partition layer appends Kafka's control batch (`Partition.append_marker`: it ends the producer's open
transaction there, records an abort in `.txnindex`, moves the last stable offset and wakes fetches waiting
on the partition); one delayed operation waits for every marker's fsync; for a `__consumer_offsets`
partition it then tells the group coordinator, which makes the transaction's offsets visible (commit) or
drops them (abort).

Each partition gets its own code: NONE, UNKNOWN_TOPIC_OR_PARTITION (no such partition: deleted),
KAFKA_STORAGE_ERROR (offline or failed write: worth retrying), or the producer-state refusal
(INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED).

What it is handed (`MarkerTargets`) is what it touches, and narrow: the coordinators' view of the partitions
(`CoordinatorPartitions.resolve`, a partition to append to), the one group call a transaction's offsets
need (`complete_transaction`) and the clock. The transaction service's own `TxnParts` is one; the
WriteTxnMarkers handler goes through the service (`TransactionService.write_markers`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pybroker.broker.groups.offsets_topic import OFFSETS_TOPIC
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.partitions.delayed import DelayedOperation, all_of
from pybroker.broker.partitions.partition import AppendOutcome, refused
from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker.partitions.partition import Partition

log = get_logger("pybroker.transactions")

#: markers appended before the loop gets a turn for other work
MARKERS_PER_TURN = 100


class MarkerPartitions(Protocol):
    """Of the partitions, what a marker needs: one to append to, or why there is none
    (`CoordinatorPartitions.resolve`)."""

    def resolve(self, topic: str, partition: int) -> tuple[Partition | None, ErrorCode]: ...


class TransactionOffsets(Protocol):
    """Of the group coordinator, what a transaction needs: its offsets' partition of `__consumer_offsets`
    (TxnOffsetCommit's check), and its offsets made visible or dropped once its marker there is durable
    (`GroupService` is one)."""

    def partition_for(self, group_id: str) -> int: ...

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None: ...


class MarkerTargets(Protocol):
    """Where markers go: the partitions, the group coordinator (offsets of a transaction), and the clock."""

    @property
    def partitions(self) -> MarkerPartitions: ...

    @property
    def groups(self) -> TransactionOffsets: ...

    @property
    def clock_ms(self) -> Callable[[], int]: ...


async def write_markers(state: MarkerTargets, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        commit: bool, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
    now = state.clock_ms()
    appends: list[DelayedOperation[AppendOutcome]] = []
    for index, (topic, partition) in enumerate(partitions):
        if index and index % MARKERS_PER_TURN == 0:
            await asyncio.sleep(0)  # a transaction over thousands of partitions does not hold the loop
        target, code = state.partitions.resolve(topic, partition)
        appends.append(refused((topic, partition), code) if target is None else
                       target.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, now_ms=now))
    outcomes = await all_of(appends)  # one wait: every marker fsynced, or refused
    results: dict[tuple[str, int], ErrorCode] = {}
    for key, outcome in zip(partitions, outcomes, strict=True):
        results[key] = outcome.error
        if outcome.error is ErrorCode.NONE and key[0] == OFFSETS_TOPIC:
            _complete_offsets(state, key[1], producer_id, commit)
    return results


def _complete_offsets(state: MarkerTargets, partition: int, producer_id: int, commit: bool) -> None:
    try:
        state.groups.complete_transaction(partition, producer_id, commit)
    except Exception:
        log.exception("group coordinator failed to complete a transaction's offsets", partition=partition,
                      producer_id=producer_id)
