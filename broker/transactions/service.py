"""The transaction coordinator inside the broker: its coordinator, its topic and its runtime, wired together.

Owns the pieces the handlers use (`coordinator`, `state_topic`) and hands the shared coordinator runtime
(`pybroker.broker.coordinator`, which also loads the topic at startup) the two periodic duties no request
triggers: aborting transactions past their timeout (every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`) and removing idle transactional ids
(every `transaction.remove.expired.transaction.cleanup.interval.ms`). At startup every partition of
`__transaction_state` is replayed; a transaction found between prepare and complete has its markers
written and its Complete record appended, as Kafka's coordinator does when it takes a partition over.

The read API for the admin handlers and metrics: `get(transactional_id)` and `all()`, the adopted
`TxnMetadata` (state, producer id and epoch, timeout, start time, partitions).

It is handed only what it uses (`TxnParts`), not the broker state, so what it can reach is stated in one
place, and it sits on the same narrow interface as the group coordinator: the coordinators' view of the
partitions (`CoordinatorPartitions`: the config, the clock, its topic's partitions to append to and read
back, whether a partition exists), the two calls it makes of the group coordinator
(`markers.TransactionOffsets`) and the producer-id source. It never sees the partition layer, the log
manager or the group coordinator's insides.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from pybroker.broker.coordinator.runtime import CoordinatorRuntime, Periodic, Replay
from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
from pybroker.broker.transactions.coordinator import TransactionCoordinator, TxnConfig
from pybroker.broker.transactions.markers import TransactionOffsets, write_markers
from pybroker.broker.transactions.metadata import TxnMetadata
from pybroker.broker.transactions.state_topic import ReplayedPartition, TransactionStateTopic, replay
from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.config.broker_config import BrokerConfig


@dataclass(frozen=True, slots=True)
class TxnParts:
    """What the transaction coordinator uses of the broker (and, as `MarkerTargets`, what markers need)."""

    #: the coordinators' interface to partitions: `__transaction_state` appends and reads, the markers'
    #: appends, the partitions that exist; and the config and the clock
    partitions: CoordinatorPartitions
    #: the group coordinator's two entries: TxnOffsetCommit's partition, and a transaction's offsets made
    #: visible or dropped
    groups: TransactionOffsets
    new_producer_id: Callable[[], int]

    @property
    def config(self) -> BrokerConfig:
        return self.partitions.config

    @property
    def clock_ms(self) -> Callable[[], int]:
        return self.partitions.clock_ms


def txn_config(config: BrokerConfig, num_partitions: int) -> TxnConfig:
    return TxnConfig(
        num_partitions=num_partitions,
        max_timeout_ms=int(config.get("transaction.max.timeout.ms")),
        id_expiration_ms=int(config.get("transactional.id.expiration.ms")),
        two_phase_commit_enabled=bool(config.get("transaction.two.phase.commit.enable")),
        partition_verification=bool(config.get("transaction.partition.verification.enable")),
    )


class _LoadedTransactions:
    """The coordinator as the runtime's loading sees it."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    @property
    def loading(self) -> set[int]:
        return self.coordinator.loading

    def begin_loading(self, partitions: Iterable[int]) -> None:
        self.coordinator.begin_loading(partitions)

    def install(self, partition: int, replayed: ReplayedPartition | None) -> int:
        transactions = replayed.transactions if replayed is not None else {}
        self.coordinator.finish_loading(partition, transactions)
        return sum(1 for m in transactions.values() if m is not None)


class TransactionService:
    def __init__(self, parts: TxnParts) -> None:
        self.parts = parts
        self.state_topic = TransactionStateTopic(parts.partitions)
        self.coordinator = TransactionCoordinator(
            txn_config(parts.config, self.state_topic.num_partitions), self.state_topic,
            partial(write_markers, parts), new_producer_id=parts.new_producer_id, clock_ms=parts.clock_ms,
            partition_exists=parts.partitions.partition_exists)
        config = parts.config
        # aborting transactions past their timeout, and removing idle transactional ids, each on its interval
        self.runtime = CoordinatorRuntime(
            "transaction coordinator", self.state_topic, _LoadedTransactions(self.coordinator),
            Replay(replay, lambda replayed: replayed.records), clock_ms=parts.clock_ms,
            periodic=[
                Periodic(int(config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms")) / 1000,
                         lambda _now: self.coordinator.abort_timed_out()),
                Periodic(int(config.get("transaction.remove.expired.transaction.cleanup.interval.ms")) / 1000,
                         lambda _now: self.coordinator.expire_idle())],
            on_partition_count=self._follow_partition_count, logger="pybroker.transactions",
            loaded_key="transactional_ids")

    def _follow_partition_count(self, num_partitions: int) -> None:
        self.coordinator.config = txn_config(self.parts.config, num_partitions)

    # -- the read API -----------------------------------------------------------------------------------
    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self.coordinator.get(transactional_id)

    def all(self) -> list[TxnMetadata]:
        return self.coordinator.all()

    # -- the contract with produce and TxnOffsetCommit ----------------------------------------------------
    def check_produce(self, transactional_id: str | None, producer_id: int, producer_epoch: int, topic: str,
                      partition: int, api_version: int) -> ErrorCode | Awaitable[ErrorCode]:
        return self.coordinator.check_produce(transactional_id, producer_id, producer_epoch, topic, partition,
                                              api_version)

    def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                group_id: str, api_version: int = 0) -> ErrorCode | Awaitable[ErrorCode]:
        partition = self.parts.groups.partition_for(group_id)
        return self.coordinator.check_txn_offset_commit(transactional_id, producer_id, producer_epoch, group_id,
                                                        partition, api_version)

    # -- the WriteTxnMarkers API ----------------------------------------------------------------------------
    async def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                            partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """Markers of one producer's transaction into `partitions` (`markers.write_markers`), on the loop.
        Authorizes nothing: the WriteTxnMarkers handler's rule (CLUSTER_ACTION) has already run."""
        return await write_markers(self.parts, producer_id, producer_epoch, coordinator_epoch, commit, partitions)

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Begin loading `__transaction_state` (requests for its ids wait until their partition is in)."""
        self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop(self.coordinator.shutdown)
