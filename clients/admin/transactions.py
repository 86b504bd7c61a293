"""What `pybroker transactions ...` asks the broker, as kafka-transactions.sh does: ListTransactions,
DescribeTransactions (after FindCoordinator), DescribeProducers, and WriteTxnMarkers to abort a hanging
transaction, turned into plain rows.

A hanging transaction is one a partition still holds open (DescribeProducers shows a current transaction
start offset) that its coordinator no longer counts on finishing: no transactional id owns the producer
id, or the id's transaction does not list that partition. Those are what `abort` is for (it writes an ABORT
marker for whatever transaction it is pointed at); it looks the producer up by the transaction's start
offset, as the Kafka tool does for brokers from 3.0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pybroker.clients.admin.topics import check, metadata
from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from pybroker.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from pybroker.protocol.messages.list_transactions import ListTransactionsRequest
from pybroker.protocol.messages.metadata import MetadataRequest
from pybroker.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

TRANSACTION_KEY = 1  # FindCoordinator key type of a transactional id
#: Kafka's tool sends DescribeProducers in batches of this many partitions
MAX_BATCH = 500
MINUTE_MS = 60_000
LIST_COLUMNS = ["transactional_id", "coordinator", "producer_id", "state"]
DESCRIBE_COLUMNS = ["coordinator_id", "transactional_id", "producer_id", "producer_epoch", "state",
                    "timeout_ms", "start_time_ms", "duration_ms", "topic_partitions"]
PRODUCER_COLUMNS = ["producer_id", "producer_epoch", "latest_coordinator_epoch", "last_sequence", "last_timestamp",
                    "current_transaction_start_offset"]
HANGING_COLUMNS = ["topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch", "start_offset",
                   "last_timestamp", "duration_min"]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _node_id(client: WireClient) -> int:
    """The broker's id, the coordinator of every listed id (one node coordinates them all)."""
    response = client.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), max_version=12)
    return int(response.brokers[0].node_id) if response.brokers else -1


def list_transactions(client: WireClient, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                      duration_ms: int | None = None, pattern: str | None = None) -> list[dict[str, Any]]:
    request = ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                      duration_filter=-1 if duration_ms is None else duration_ms,
                                      transactional_id_pattern=pattern)
    needed = 2 if pattern is not None else (1 if duration_ms is not None else 0)
    served = client.versions.get(ApiKey.LIST_TRANSACTIONS, (0, -1))[1]
    if served < needed:
        what = "--transactional-id-pattern" if needed == 2 else "--duration-ms"
        raise WireError(f"{what} needs ListTransactions v{needed}; the broker serves up to v{served}")
    response = client.call(request)
    check(response.error_code, None, "ListTransactions")
    if response.unknown_state_filters:
        raise WireError(f"ListTransactions: unknown state filter(s): {', '.join(response.unknown_state_filters)}"
                        " (states are Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, "
                        "PrepareEpochFence)")
    coordinator = _node_id(client)
    return [{"transactional_id": t.transactional_id, "coordinator": coordinator, "producer_id": t.producer_id,
             "state": t.transaction_state}
            for t in sorted(response.transaction_states, key=lambda t: t.transactional_id)]


def find_transaction_coordinator(client: WireClient, transactional_id: str) -> int:
    response = client.call(FindCoordinatorRequest(key=transactional_id, key_type=TRANSACTION_KEY,
                                                  coordinator_keys=[transactional_id]))
    if getattr(response, "coordinators", None):
        found = response.coordinators[0]
        check(found.error_code, found.error_message, f"FindCoordinator {transactional_id}")
        return int(found.node_id)
    check(response.error_code, response.error_message, f"FindCoordinator {transactional_id}")
    return int(response.node_id)


def describe_transactions(client: WireClient, transactional_ids: list[str], *, missing_ok: bool = False
                          ) -> list[dict[str, Any]]:
    """One row per id; with `missing_ok`, ids the coordinator does not know are left out instead of failing."""
    if not transactional_ids:
        return []
    coordinator = find_transaction_coordinator(client, transactional_ids[0])
    response = client.call(DescribeTransactionsRequest(transactional_ids=transactional_ids))
    rows = []
    now = _now_ms()
    for state in response.transaction_states:
        if missing_ok and state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            continue
        check(state.error_code, None, f"DescribeTransactions {state.transactional_id}")
        start = state.transaction_start_time_ms
        rows.append({
            "coordinator_id": coordinator, "transactional_id": state.transactional_id,
            "producer_id": state.producer_id, "producer_epoch": state.producer_epoch,
            "state": state.transaction_state, "timeout_ms": state.transaction_timeout_ms,
            "start_time_ms": start if start >= 0 else None, "duration_ms": now - start if start >= 0 else None,
            "topic_partitions": sorted(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)})
    return rows


@dataclass(frozen=True, slots=True)
class ProducerRow:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int

    def as_row(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "latest_coordinator_epoch": self.coordinator_epoch, "last_sequence": self.last_sequence,
                "last_timestamp": self.last_timestamp,
                "current_transaction_start_offset": self.txn_start_offset if self.txn_start_offset >= 0 else None}


def describe_producers(client: WireClient, partitions: list[tuple[str, int]]) -> list[ProducerRow]:
    """The active producers of each partition (batched as the Kafka tool batches); a partition error fails."""
    rows: list[ProducerRow] = []
    for start in range(0, len(partitions), MAX_BATCH):
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions[start:start + MAX_BATCH]:
            by_topic.setdefault(topic, []).append(partition)
        response = client.call(DescribeProducersRequest(topics=[
            TopicRequest(name=topic, partition_indexes=parts) for topic, parts in by_topic.items()]))
        for topic in response.topics:
            for part in topic.partitions:
                check(part.error_code, part.error_message, f"DescribeProducers {topic.name}-{part.partition_index}")
                rows += [ProducerRow(topic.name, part.partition_index, p.producer_id, p.producer_epoch,
                                     p.coordinator_epoch, p.last_sequence, p.last_timestamp,
                                     p.current_txn_start_offset)
                         for p in part.active_producers]
    return rows


def abort_transaction(client: WireClient, topic: str, partition: int, *, start_offset: int | None = None,
                      producer_id: int | None = None, producer_epoch: int | None = None,
                      coordinator_epoch: int | None = None) -> dict[str, Any]:
    """Write an ABORT marker for one producer's open transaction on one partition (WriteTxnMarkers)."""
    if start_offset is not None:
        found = [p for p in describe_producers(client, [(topic, partition)]) if p.txn_start_offset == start_offset]
        if not found:
            raise WireError(f"no open transaction starts at offset {start_offset} on {topic}-{partition}")
        producer_id, producer_epoch, coordinator_epoch = (found[0].producer_id, found[0].producer_epoch,
                                                          found[0].coordinator_epoch)
    if producer_id is None or producer_epoch is None or coordinator_epoch is None:
        raise WireError("identify the transaction with --start-offset, or with --producer-id, --producer-epoch "
                        "and --coordinator-epoch")
    # a producer whose transactions never reached a marker shows coordinator epoch -1: 0 is below any real one
    coordinator_epoch = max(coordinator_epoch, 0)
    response = client.call(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
        coordinator_epoch=coordinator_epoch)]))
    for marker in response.markers:
        for result_topic in marker.topics:
            for part in result_topic.partitions:
                check(part.error_code, None, f"WriteTxnMarkers {result_topic.name}-{part.partition_index}")
    return {"topic": topic, "partition": partition, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "coordinator_epoch": coordinator_epoch, "aborted": True}


def _partitions_to_search(client: WireClient, topic: str | None, partition: int | None) -> list[tuple[str, int]]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    found = []
    for described in metadata(client, None if topic is None else [topic]):
        check(described.error_code, None, f"topic {described.name}")
        if topic is None and described.is_internal:
            continue  # as the Kafka tool lists topics: without the internal ones unless named
        found += [(described.name, p.partition_index) for p in described.partitions]
    return sorted(found)


def find_hanging(client: WireClient, topic: str | None = None, partition: int | None = None,
                 max_transaction_timeout_ms: int = 15 * MINUTE_MS) -> list[dict[str, Any]]:
    """Open transactions older than `max_transaction_timeout_ms` that their coordinator will not finish."""
    now = _now_ms()
    candidates = [p for p in describe_producers(client, _partitions_to_search(client, topic, partition))
                  if p.txn_start_offset >= 0 and now - p.last_timestamp > max_transaction_timeout_ms]
    if not candidates:
        return []
    producer_ids = sorted({p.producer_id for p in candidates})
    owners = {row["producer_id"]: row["transactional_id"] for row in list_transactions(client, producer_ids=producer_ids)}
    described = {row["transactional_id"]: row for row in describe_transactions(
        client, sorted(set(owners.values())), missing_ok=True)}
    hanging = []
    for p in candidates:
        owner = described.get(owners.get(p.producer_id, ""))
        if owner is not None and f"{p.topic}-{p.partition}" in owner["topic_partitions"]:
            continue  # the coordinator still means to write this partition's marker
        hanging.append({"topic": p.topic, "partition": p.partition, "producer_id": p.producer_id,
                        "producer_epoch": p.producer_epoch, "coordinator_epoch": p.coordinator_epoch,
                        "start_offset": p.txn_start_offset, "last_timestamp": p.last_timestamp,
                        "duration_min": (now - p.last_timestamp) // MINUTE_MS})
    return hanging

