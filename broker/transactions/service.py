"""The transaction coordinator inside the broker: loading at startup, the timers, shutdown.

Owns the pieces the handlers use (`coordinator`, `state_topic`) and the two periodic duties no request
triggers: aborting transactions past their timeout (every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`) and removing idle transactional ids
(every `transaction.remove.expired.transaction.cleanup.interval.ms`). At startup every partition of
`__transaction_state` is replayed; a transaction found between prepare and complete has its markers
written and its Complete record appended, as Kafka's coordinator does when it takes a partition over.

The read API for the admin handlers and metrics: `get(transactional_id)` and `all()`, the adopted
`TxnMetadata` (state, producer id and epoch, timeout, start time, partitions).

It is handed only what it uses (`TxnParts`: the settings, the clock, the partition layer, the group
service and the producer-id source), not the broker state, so what it can reach is stated in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
from pybroker.broker.transactions.coordinator import TransactionCoordinator, TxnConfig
from pybroker.broker.transactions.markers import write_markers
from pybroker.broker.transactions.metadata import TxnMetadata
from pybroker.broker.transactions.state_topic import TRANSACTION_STATE_TOPIC, TransactionStateTopic, replay
from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker.groups.service import GroupService
    from pybroker.broker.partitions.manager import ReplicaManager
    from pybroker.config.broker_config import BrokerConfig

log = get_logger("pybroker.transactions")


@dataclass(frozen=True, slots=True)
class TxnParts:
    """What the transaction coordinator uses of the broker (and, as `MarkerTargets`, what markers need)."""

    config: BrokerConfig
    clock_ms: Callable[[], int]
    #: the partition layer: `__transaction_state` appends and reads, markers, the logs that exist
    replicas: ReplicaManager
    #: the group service: TxnOffsetCommit's partition, and a transaction's offsets made visible or dropped
    groups: GroupService
    new_producer_id: Callable[[], int]


def txn_config(config: BrokerConfig, num_partitions: int) -> TxnConfig:
    return TxnConfig(
        num_partitions=num_partitions,
        max_timeout_ms=int(config.get("transaction.max.timeout.ms")),
        id_expiration_ms=int(config.get("transactional.id.expiration.ms")),
        two_phase_commit_enabled=bool(config.get("transaction.two.phase.commit.enable")),
        partition_verification=bool(config.get("transaction.partition.verification.enable")),
    )


class TransactionService:
    def __init__(self, parts: TxnParts) -> None:
        self.parts = parts
        self._logs = parts.replicas.logs
        self.state_topic = TransactionStateTopic(CoordinatorPartitions(parts.config, parts.clock_ms, parts.replicas))
        self.coordinator = TransactionCoordinator(
            txn_config(parts.config, self.state_topic.num_partitions), self.state_topic,
            partial(write_markers, parts), new_producer_id=parts.new_producer_id, clock_ms=parts.clock_ms,
            partition_exists=lambda topic, partition: self._logs.get_log(topic, partition) is not None)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

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
        partition = self.parts.groups.coordinator.partition_for(group_id)
        return self.coordinator.check_txn_offset_commit(transactional_id, producer_id, producer_epoch, group_id,
                                                        partition, api_version)

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Begin loading `__transaction_state` (requests for its ids wait until their partition is in)."""
        info = self._logs.topics().get(TRANSACTION_STATE_TOPIC)
        if info is not None and info.num_partitions != self.state_topic.num_partitions:
            # the records are where the existing topic put them: follow its partition count
            self.state_topic.num_partitions = info.num_partitions
            self.coordinator.config = txn_config(self.parts.config, info.num_partitions)
        if info is not None:
            self.coordinator.begin_loading(range(info.num_partitions))
        self._tasks = [asyncio.create_task(self._load(info is not None)),
                       asyncio.create_task(self._tick())]

    async def _load(self, exists: bool) -> None:
        if not exists:
            return
        started = time.monotonic()
        transactions = records = 0
        for partition in sorted(self.coordinator.loading):
            partition_log = self._logs.get_log(TRANSACTION_STATE_TOPIC, partition)
            if partition_log is None:
                self.coordinator.finish_loading(partition, {})
                continue
            try:
                replayed = await asyncio.to_thread(replay, partition_log)
            except Exception as exc:  # a partition we cannot read stays loading: its ids get a retriable code
                log.error("cannot load transaction state partition", partition=partition, error=repr(exc))
                continue
            self.coordinator.finish_loading(partition, replayed.transactions)
            transactions += sum(1 for m in replayed.transactions.values() if m is not None)
            records += replayed.records
        log.info("transaction coordinator loaded", transactional_ids=transactions, records=records,
                 seconds=round(time.monotonic() - started, 3))

    async def _tick(self) -> None:
        config = self.parts.config
        abort_every = int(config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms")) / 1000
        expire_every = int(config.get(
            "transaction.remove.expired.transaction.cleanup.interval.ms")) / 1000
        last_abort = last_expiry = time.monotonic()
        while not self._stopping.is_set():
            # asleep until the next check is due (not a poll every second: an idle broker stays idle)
            wait_s = min(last_abort + abort_every, last_expiry + expire_every) - time.monotonic()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), max(wait_s, 0.001))
            try:
                if time.monotonic() - last_abort >= abort_every:
                    last_abort = time.monotonic()
                    await self.coordinator.abort_timed_out()
                if time.monotonic() - last_expiry >= expire_every:
                    last_expiry = time.monotonic()
                    await self.coordinator.expire_idle()
            except Exception:
                log.exception("transaction coordinator timer failed")

    async def stop(self) -> None:
        self._stopping.set()
        await self.coordinator.shutdown()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
