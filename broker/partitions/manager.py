"""The facade handlers call for partitions: find one (with Kafka's error when there is none), append, read, wait.

Every lookup of a partition by handlers and coordinators goes through here (`resolve`, `resolve_for_write`),
and clients' produced records enter the partition layer here (`append_records`).

Kafka's `ReplicaManager` in our terms, for a single node: it owns the purgatory where delayed operations
watch partitions, and hands out `Partition`s over storage's `LogManager`. It keeps no `Log` of its own:
every lookup asks the `LogManager`, which swaps a partition's log when it moves between log dirs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.broker.partitions import leader_append
from pybroker.broker.partitions.append_order import AppendOrder
from pybroker.broker.partitions.partition import Partition
from pybroker.broker.partitions.purgatory import PartitionKey, Purgatory
from pybroker.broker.topics import INTERNAL_TOPICS
from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker.metrics.traffic import TopicTraffic
    from pybroker.broker.schema_registry.validation import SchemaValidation
    from pybroker.storage.log_manager import LogManager


class ReplicaManager:
    __slots__ = ("append_order", "logs", "purgatory", "schema_validation", "traffic")

    def __init__(self, logs: LogManager, traffic: TopicTraffic, purgatory: Purgatory | None = None) -> None:
        self.logs = logs
        #: per-topic bytes and messages in, counted where clients' appends happen
        self.traffic = traffic
        self.purgatory = purgatory if purgatory is not None else Purgatory()
        #: clients' appends to a partition keep their requests' order, though some are validated off the loop
        self.append_order = AppendOrder()
        #: the produce-time schema check (`broker/schema_registry/validation.py`); None when no registry runs
        self.schema_validation: SchemaValidation | None = None

    # -- finding partitions --------------------------------------------------------------------------
    def resolve(self, topic: str, partition: int) -> tuple[Partition | None, ErrorCode]:
        """For a read: the partition, or UNKNOWN_TOPIC_OR_PARTITION / KAFKA_STORAGE_ERROR (its dir is offline)."""
        found = self.logs.get_log(topic, partition)
        if found is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not self.logs.is_online(found):
            return None, ErrorCode.KAFKA_STORAGE_ERROR
        return Partition(self, (topic, partition), found), ErrorCode.NONE

    def resolve_for_write(self, topic: str, partition: int) -> tuple[Partition | None, ErrorCode]:
        """As `resolve`, refusing clients' writes to internal topics (their coordinators use `resolve`)."""
        if topic in INTERNAL_TOPICS:
            return None, ErrorCode.INVALID_TOPIC_EXCEPTION
        return self.resolve(topic, partition)

    # -- clients' writes -----------------------------------------------------------------------------
    def append_records(self, topic: str, partition: int, records: Any, *, acks: int, now_ms: int, allow_zstd: bool,
                       transaction: leader_append.TransactionCheck | None = None) -> leader_append.Appending:
        """A produce request's records for one partition, validated, stamped and appended in its turn
        (`leader_append`): the outcome now, or a coroutine when validation runs off the loop."""
        return leader_append.append_records(self, topic, partition, records, acks=acks, now_ms=now_ms,
                                            allow_zstd=allow_zstd, transaction=transaction)

    # -- after the call ------------------------------------------------------------------------------
    def report_io_error(self, topic: str, partition: int, exc: BaseException) -> None:
        """An I/O error on a partition's files, found after the call that had its log: its dir goes offline."""
        found = self.logs.get_log(topic, partition)
        if found is not None:
            self.logs.report_io_error(found, exc)

    # -- waking --------------------------------------------------------------------------------------
    def notify(self, key: PartitionKey) -> None:
        """Something changed `key` outside an append (deleted, its dir offline): its watchers look again."""
        self.purgatory.notify(key)

    def wake_all(self) -> None:
        """At shutdown: every delayed operation answers now with what it has."""
        self.purgatory.wake_all()
