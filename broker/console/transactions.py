"""The transactions page: open transactions, hanging ones, and aborting a hanging one.

Called on the event loop by the console's router (`admin_routes`). Each step is the request
`kafka-transactions.sh` sends, handed to the broker's own handler as the console user:

| step | Kafka API | authorizes |
| --- | --- | --- |
| `transactions` (the list) | ListTransactions, then DescribeTransactions | DESCRIBE on each TRANSACTIONAL_ID (others are left out) |
| `hanging` (the search) | Metadata, DescribeProducers, ListTransactions, DescribeTransactions | DESCRIBE on each TOPIC listed, READ on each searched, DESCRIBE on the TRANSACTIONAL_IDs |
| `abort` | DescribeProducers, WriteTxnMarkers | READ on the TOPIC, CLUSTER_ACTION on the CLUSTER |

A hanging transaction is one a partition still holds open (DescribeProducers shows a current transaction
start offset) that its coordinator will never finish: no transactional id owns the producer id any more,
or the id's transaction does not list that partition. It holds the partition's last stable offset, so
read_committed consumers stop there until an ABORT marker is written. `abort` is pointed at one
partition and the start offset the search showed; it writes the marker only if a producer's open
transaction still starts there (so a stale page cannot abort a newer transaction). The search reads at
most `MAX_SEARCHED` partitions in batches of `BATCH`, as the Kafka tool batches them.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.console import params as p
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.params import ConsoleError
from pybroker.broker.console.reads import error_name, metadata, refused
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from pybroker.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pybroker.protocol.messages.list_transactions import ListTransactionsRequest
from pybroker.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

#: transactional ids described per page (one DescribeTransactions each)
MAX_LISTED = 500
#: partitions one hanging search reads, and per DescribeProducers request
MAX_SEARCHED = 10_000
BATCH = 500
#: Kafka's default for the search: older than the longest transaction timeout (15 minutes)
DEFAULT_OLDER_THAN_MS = 15 * 60_000
MAX_OLDER_THAN_MS = 365 * 24 * 3600 * 1000
LIST_TRANSACTIONS_VERSION = 0  # no filters but producer ids are needed
DESCRIBE_PRODUCERS_VERSION = 0


async def _describe(client: LocalClient, ids: list[str], now_ms: int) -> list[dict[str, Any]]:
    if not ids:
        return []
    response = await client.call(DescribeTransactionsRequest(transactional_ids=ids))
    rows = []
    for state in response.transaction_states:
        start = state.transaction_start_time_ms
        rows.append({
            "transactional_id": state.transactional_id, "error": error_name(state.error_code) if state.error_code
            else None, "state": state.transaction_state, "producer_id": state.producer_id,
            "producer_epoch": state.producer_epoch, "timeout_ms": state.transaction_timeout_ms,
            "start_time_ms": start if start >= 0 else None, "duration_ms": now_ms - start if start >= 0 else None,
            "partitions": sorted(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)})
    return rows


async def transactions(client: LocalClient, now_ms: int) -> dict[str, Any]:
    """Every transactional id the user may DESCRIBE, with its state, producer, timeout, age and partitions."""
    response = await client.call(ListTransactionsRequest(), LIST_TRANSACTIONS_VERSION)
    if response.error_code:
        raise refused(response.error_code, "ListTransactions")
    listed = sorted(t.transactional_id for t in response.transaction_states)
    rows = await _describe(client, listed[:MAX_LISTED], now_ms)
    return {"transactions": rows, "total": len(listed), "shown": len(rows)}


async def _producers(client: LocalClient, partitions: list[tuple[str, int]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for start in range(0, len(partitions), BATCH):
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions[start:start + BATCH]:
            by_topic.setdefault(topic, []).append(partition)
        response = await client.call(DescribeProducersRequest(topics=[
            TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()]), DESCRIBE_PRODUCERS_VERSION)
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code:
                    raise refused(part.error_code, f"producers of {topic.name}-{part.partition_index}",
                                  part.error_message)
                found += [{"topic": topic.name, "partition": part.partition_index, "producer_id": s.producer_id,
                           "producer_epoch": s.producer_epoch, "coordinator_epoch": s.coordinator_epoch,
                           "start_offset": s.current_txn_start_offset, "last_timestamp": s.last_timestamp}
                          for s in part.active_producers]
    return found


async def _searched(client: LocalClient, topic: str | None) -> list[tuple[str, int]]:
    described = await metadata(client, None if topic is None else [topic])
    keys = []
    for t in described:
        if t.error_code:
            if topic is not None:
                raise refused(t.error_code, f"topic {topic}")
            continue  # a topic the user may not see is not searched
        if topic is None and t.is_internal:
            continue  # as the Kafka tool searches: internal topics only when named
        keys += [(t.name, part.partition_index) for part in t.partitions]
    if len(keys) > MAX_SEARCHED:
        raise p.bad(f"more than {MAX_SEARCHED} partitions to search: name a topic")
    return sorted(keys)


async def hanging(client: LocalClient, params: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """Open transactions older than `older_than_ms` that their coordinator will not finish (see above)."""
    topic = p.optional_text(params, "topic", max_len=p.MAX_TOPIC_NAME) or None
    older_than = p.integer(params, "older_than_ms", 0, MAX_OLDER_THAN_MS, DEFAULT_OLDER_THAN_MS)
    keys = await _searched(client, topic)
    candidates = [s for s in await _producers(client, keys)
                  if s["start_offset"] >= 0 and now_ms - s["last_timestamp"] >= older_than]
    owners: dict[int, str] = {}
    if candidates:
        listed = await client.call(ListTransactionsRequest(
            producer_id_filters=sorted({s["producer_id"] for s in candidates})), LIST_TRANSACTIONS_VERSION)
        owners = {t.producer_id: t.transactional_id for t in listed.transaction_states}
    described = {row["transactional_id"]: row for row in await _describe(client, sorted(set(owners.values())), now_ms)}
    rows = []
    for s in candidates:
        owner = described.get(owners.get(s["producer_id"], ""))
        if owner is not None and owner["error"] is None and f"{s['topic']}-{s['partition']}" in owner["partitions"]:
            continue  # its coordinator still means to write this partition's marker
        rows.append({**s, "age_ms": now_ms - s["last_timestamp"], "transactional_id": owners.get(s["producer_id"])})
    return {"searched_partitions": len(keys), "older_than_ms": older_than, "hanging": rows}


async def abort(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    """An ABORT marker for the open transaction starting at `start_offset` of `topic`-`partition`."""
    topic = p.text(body, "topic", max_len=p.MAX_TOPIC_NAME)
    partition = p.integer(body, "partition", 0, 2**31 - 1)
    start_offset = p.integer(body, "start_offset", 0, p.INT64_MAX)
    found = [s for s in await _producers(client, [(topic, partition)]) if s["start_offset"] == start_offset]
    if not found:
        raise ConsoleError(404, f"no open transaction starts at offset {start_offset} of {topic}-{partition}")
    producer = found[0]
    # a producer whose transactions never reached a marker shows coordinator epoch -1: 0 is below any real one
    coordinator_epoch = max(producer["coordinator_epoch"], 0)
    response = await client.call(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=producer["producer_id"], producer_epoch=producer["producer_epoch"], transaction_result=False,
        topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
        coordinator_epoch=coordinator_epoch)]))
    for marker in response.markers:
        for answer in marker.topics:
            for part in answer.partitions:
                if part.error_code != ErrorCode.NONE:
                    raise refused(part.error_code, f"abort on {answer.name}-{part.partition_index}")
    return {"topic": topic, "partition": partition, "start_offset": start_offset,
            "producer_id": producer["producer_id"], "producer_epoch": producer["producer_epoch"], "aborted": True}
