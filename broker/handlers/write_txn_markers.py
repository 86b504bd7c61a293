"""WriteTxnMarkers (key 27), versions 1-2: write COMMIT or ABORT control batches into partitions.

In Kafka the transaction coordinator sends this to each partition leader to end a transaction; with one
node our coordinator writes its markers directly, so what arrives here comes from administrators: Kafka's
`kafka-transactions.sh abort` (Admin.abortTransaction) ends a hanging transaction with an ABORT marker
carrying the producer's id, epoch and the coordinator epoch DescribeProducers showed. Each marker goes
through the transaction service's `write_markers` (append, ending the producer's open transaction and moving the
last stable offset, waking long-polls, fsync before the answer; for a `__consumer_offsets` partition the
group's pending transactional offsets are completed too).

Per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition we do not have; the storage's refusals
(INVALID_PRODUCER_EPOCH for an epoch below the producer's, TRANSACTION_COORDINATOR_FENCED for a coordinator
epoch below the one stored) come back from `write_markers`, and a request with any is one rate-limited
warning line, however many markers and partitions it named. A partition named twice in one marker is
written once. v1 is flexible; v2 adds the transaction version (KIP-890), which changes nothing here.
One request may name at most MAX_PARTITIONS (marker, partition) pairs: each costs an append and an fsync
wait, so the rest are answered INVALID_REQUEST instead of written.

Authorizes CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every partition), as Kafka does.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_txn import write_txn_markers_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

MAX_PARTITIONS = 10_000

TopicPartition = tuple[str, int]


def marker_partitions(marker: WritableTxnMarker) -> list[TopicPartition]:
    """The marker's partitions, each once, in the order first named."""
    return list(dict.fromkeys((t.name, p) for t in marker.topics for p in t.partition_indexes))


def result(marker: WritableTxnMarker, codes: dict[TopicPartition, int]) -> WritableTxnMarkerResult:
    by_topic: dict[str, list[WritableTxnMarkerPartitionResult]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(WritableTxnMarkerPartitionResult(partition_index=partition,
                                                                               error_code=code))
    return WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
        WritableTxnMarkerTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()])


async def _write(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    budget = MAX_PARTITIONS
    results = []
    for marker in request.markers:
        codes: dict[TopicPartition, int] = {}
        known: list[TopicPartition] = []
        for tp in marker_partitions(marker):
            if budget <= 0:
                codes[tp] = ErrorCode.INVALID_REQUEST
            elif ctx.state.logs.get_log(*tp) is None:
                codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                codes[tp] = ErrorCode.NONE
                known.append(tp)
            budget -= 1
        if known:
            written = await ctx.state.transactions.write_markers(marker.producer_id, marker.producer_epoch,
                                                                 marker.coordinator_epoch, marker.transaction_result,
                                                                 known)
            codes.update({tp: int(written.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in known})
        results.append(result(marker, codes))
    refused = [(tp, code) for r in results for t in r.topics for tp, code in
               (((t.name, q.partition_index), q.error_code) for q in t.partitions)
               if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED)]
    if refused:  # one rate-limited line per request, however many markers and partitions it named
        (topic, partition), code = refused[0]
        ctx.state.guard.warnings.warning("transaction marker refused", "transaction markers refused",
                                         partitions=len(refused), first_topic=topic, first_partition=partition,
                                         error=ErrorCode(code).name, client_id=ctx.client_id)
    return WriteTxnMarkersResponse(markers=results)


@handler(ApiKey.WRITE_TXN_MARKERS, versions=(1, 2), authorize=write_txn_markers_rule)
def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest
                             ) -> Awaitable[WriteTxnMarkersResponse]:
    return _write(ctx, request)  # still working (appends, fsync): later requests of the connection wait
