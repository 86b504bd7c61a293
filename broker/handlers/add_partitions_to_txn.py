"""AddPartitionsToTxn (key 24), versions 0-5: partitions join a producer's transaction.

v0-3 (clients): one transaction; every partition must exist (UNKNOWN_TOPIC_OR_PARTITION, the others
OPERATION_NOT_ATTEMPTED, as Kafka answers), then the coordinator adds them all with one fsynced write to
`__transaction_state` and every partition gets the outcome: INVALID_PRODUCER_ID_MAPPING (unknown id or
producer id), PRODUCER_FENCED (an older epoch; INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS
(the previous transaction is still completing), COORDINATOR_LOAD_IN_PROGRESS. v3 is flexible.
v4-5 (KIP-890, the broker-to-coordinator form): several transactions per request, each either added or,
with `verify_only`, checked (a partition not in the transaction: TRANSACTION_ABORTABLE); a top-level
error code. v5 may answer TRANSACTION_ABORTABLE (v4: INVALID_TXN_STATE instead).

A request may name at most `max.partitions.per.request` partitions in all; a larger one is refused
whole (INVALID_REQUEST), before any work.

Authorizes: v0-3 WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each
topic (TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED); v4+ CLUSTER_ACTION on the cluster
(CLUSTER_AUTHORIZATION_FAILED): `_authorize`, the rule it registers with.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import (
    CLUSTER_DENIED,
    TOPIC,
    TOPIC_DENIED,
    TXN,
    TXN_DENIED,
    Check,
    Op,
    Outcome,
)
from pybroker.broker.transactions.metadata import TV_1
from pybroker.broker.transactions.requests import ensure_state_topic, for_version, id_error
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
)

FIRST_BATCHED_VERSION = 4
FIRST_FENCED_VERSION = 2
FIRST_ABORTABLE_VERSION = 5

Codes = dict[tuple[str, int], ErrorCode]


def topic_results(topics: list[AddPartitionsToTxnTopic], codes: Codes,
                  default: ErrorCode = ErrorCode.NONE) -> list[AddPartitionsToTxnTopicResult]:
    """One result per requested topic (repeats merged), each partition with its code."""
    merged: dict[str, dict[int, ErrorCode]] = {}
    for topic in topics:
        into = merged.setdefault(topic.name, {})
        for p in topic.partitions:
            into[p] = codes.get((topic.name, p), default)
    return [AddPartitionsToTxnTopicResult(name=name, results_by_partition=[
        AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code) for p, code in parts.items()])
        for name, parts in merged.items()]


def _partitions(topics: list[AddPartitionsToTxnTopic]) -> frozenset[tuple[str, int]]:
    return frozenset((t.name, p) for t in topics for p in t.partitions)


def _count(request: AddPartitionsToTxnRequest, version: int) -> int:
    if version >= FIRST_BATCHED_VERSION:
        return sum(len(t.partitions) for txn in request.transactions for t in txn.topics)
    return sum(len(t.partitions) for t in request.v3_and_below_topics)


def _authorize(check: Check, r: AddPartitionsToTxnRequest) -> Outcome:
    """Kafka's checks; a refusal answers with this API's own per-partition results (see the docstring)."""
    if check.version >= FIRST_BATCHED_VERSION:  # the broker-to-coordinator form
        if check.cluster(Op.CLUSTER_ACTION):
            return None
        return AddPartitionsToTxnResponse(error_code=CLUSTER_DENIED, results_by_transaction=[])

    def refuse(codes: Codes, rest: ErrorCode) -> Any:
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=topic_results(r.v3_and_below_topics,
                                                                                        codes, rest))

    if not check.ok(Op.WRITE, TXN, r.v3_and_below_transactional_id):
        return refuse({}, TXN_DENIED)
    denied = {t.name for t in r.v3_and_below_topics if not check.ok(Op.WRITE, TOPIC, t.name)}
    if not denied:
        return None
    return refuse({(t.name, p): TOPIC_DENIED for t in r.v3_and_below_topics if t.name in denied
                   for p in t.partitions}, ErrorCode.OPERATION_NOT_ATTEMPTED)


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, versions=(0, 5), authorize=_authorize)
def handle_add_partitions_to_txn(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> Any:
    version = ctx.api_version
    too_many = _count(request, version) > int(ctx.state.config.get("max.partitions.per.request"))
    if version >= FIRST_BATCHED_VERSION:
        if too_many:
            return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                              results_by_transaction=[])
        return _batched(ctx, request)
    if too_many:
        return _v3_answer(request, {}, ErrorCode.INVALID_REQUEST)
    return _single(ctx, request)


def _v3_answer(request: AddPartitionsToTxnRequest, codes: Codes, default: ErrorCode) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=topic_results(
        request.v3_and_below_topics, codes, default))


def _missing(ctx: RequestContext, partitions: frozenset[tuple[str, int]]) -> Codes:
    logs = ctx.state.logs
    return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in partitions if logs.get_log(*tp) is None}


async def _add(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
               topics: list[AddPartitionsToTxnTopic], abortable_from: int) -> tuple[Codes, ErrorCode]:
    """(per-partition codes that differ from the rest, the code of the rest)."""
    code = id_error(transactional_id)
    if code is not ErrorCode.NONE:
        return {}, code
    partitions = _partitions(topics)
    missing = _missing(ctx, partitions)
    if missing:
        return missing, ErrorCode.OPERATION_NOT_ATTEMPTED
    if not partitions:
        return {}, ErrorCode.NONE
    if not await ensure_state_topic(ctx):
        return {}, ErrorCode.COORDINATOR_NOT_AVAILABLE
    code = await ctx.state.transactions.coordinator.add_partitions(
        transactional_id, producer_id, producer_epoch, partitions, TV_1)
    return {}, for_version(code, ctx.api_version, fenced_from=FIRST_FENCED_VERSION, abortable_from=abortable_from)


async def _single(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    codes, rest = await _add(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                             request.v3_and_below_producer_epoch, request.v3_and_below_topics,
                             FIRST_ABORTABLE_VERSION)
    return _v3_answer(request, codes, rest)


async def _batched(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    coordinator = ctx.state.transactions.coordinator

    async def one(txn: Any) -> AddPartitionsToTxnResult:
        if txn.verify_only:
            code = id_error(txn.transactional_id)
            if code is not ErrorCode.NONE:
                codes: Codes = dict.fromkeys(_partitions(txn.topics), code)
            else:
                codes = coordinator.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                      _partitions(txn.topics))
            codes = {tp: for_version(c, ctx.api_version, fenced_from=FIRST_FENCED_VERSION,
                                     abortable_from=FIRST_ABORTABLE_VERSION) for tp, c in codes.items()}
            return AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                            topic_results=topic_results(txn.topics, codes))
        codes, rest = await _add(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                                 FIRST_ABORTABLE_VERSION)
        return AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                        topic_results=topic_results(txn.topics, codes, rest))

    # one answer per transactional id: a repeated id is answered by its first entry's outcome
    seen: dict[str, Any] = {}
    for txn in request.transactions:
        seen.setdefault(txn.transactional_id, txn)
    results = await asyncio.gather(*(one(txn) for txn in seen.values()))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      results_by_transaction=list(results))
