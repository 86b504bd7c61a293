"""Produce (key 0), versions 0-12: decode, hand each partition's records to the partition layer, answer.

v0-2 carry the old message-set formats: they are advertised (librdkafka turns compression off without
them) and every partition is answered UNSUPPORTED_VERSION, as Kafka 4 does. v3+ carry RecordBatch v2:
each partition's records go to `ReplicaManager.append_records` (`partitions.leader_append`), which
validates the batch as Kafka's LogValidator does, stamps its timestamps, keeps the partition's appends in
the order their requests arrived, and appends it; this handler only turns each outcome into the answer.

A compressed batch is validated in a worker thread: the partition layer then returns a coroutine, and the
handler returns work still in progress that answers once every such append is done.

acks=0 sends no response; acks=1 answers once the bytes are in the log (the flush policy decides when
they reach the disk); acks=-1 answers only after the flusher has fsynced them (group commit across all
concurrent requests on the same log dir). Idempotent producers' duplicates get their original offsets.

Transactional batches are checked with the transaction coordinator before anything is validated further
(`state.transactions.check_produce`, KIP-890 part 1, given to the partition layer as its
`TransactionCheck`): the producer id and epoch must be the transactional id's current ones
(INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH) and the partition must be in the open transaction
(INVALID_TXN_STATE; TRANSACTION_ABORTABLE from v11), as Kafka 4 refuses it. v12 (transactions v2) adds
the partition to the transaction instead, with one fsynced state write first.

Unknown topics are auto-created (when `auto.create.topics.enable`) on a worker thread first, then the
request is served as usual. Work that runs off the loop (creation, validation) is a bare coroutine, so
the connection starts nothing else until the append is done, acks=0 included (the coroutine then
resolves to no answer); the fsync wait of acks=-1 that follows is a pure wait (`waiting`).

Threads: the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import Waiting, handler, waiting
from pybroker.broker.partitions.delayed import DelayedOperation, all_of
from pybroker.broker.partitions.leader_append import TransactionCheck
from pybroker.broker.partitions.partition import AppendOutcome, DelayedAppend
from pybroker.broker.security.authorization_topics import produce_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)

FIRST_RECORD_BATCH_VERSION = 3
FIRST_ZSTD_VERSION = 7

#: (response, the fsync wait of acks=-1 or None)
Outcome = tuple[PartitionProduceResponse, DelayedOperation[AppendOutcome] | None]
#: (the topic's partition answers, the place of this one among them, the append still in progress)
Deferred = tuple[list[PartitionProduceResponse], int, Coroutine[Any, Any, DelayedAppend]]


def _error(index: int, code: ErrorCode, message: str | None = None,
           record_errors: tuple[tuple[int, str], ...] = (), log_start_offset: int = -1) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                    log_start_offset=log_start_offset, error_message=message, record_errors=[
                                        BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=text)
                                        for i, text in record_errors])


def _answer(index: int, outcome: AppendOutcome) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=ErrorCode.NONE, base_offset=outcome.base_offset,
                                    log_append_time_ms=outcome.log_append_time,
                                    log_start_offset=outcome.log_start_offset)


def _outcome(index: int, appending: DelayedAppend) -> Outcome:
    """The partition's answer: its offsets, or the refusal; for acks=-1 the offsets now and the fsync wait."""
    outcome = appending.outcome
    if not appending.done:  # acks=-1: the offsets are known now, the answer waits for the fsync
        return _answer(index, outcome), appending
    if outcome.error is not ErrorCode.NONE:
        return _error(index, outcome.error, outcome.message, outcome.record_errors, outcome.log_start_offset), None
    return _answer(index, outcome), None


@handler(ApiKey.PRODUCE, versions=(0, 12), authorize=produce_rule)
def handle_produce(ctx: RequestContext, request: ProduceRequest) -> Any:
    missing = (ctx.state.topics.to_auto_create([t.name for t in request.topic_data])
               if ctx.api_version >= FIRST_RECORD_BATCH_VERSION else [])
    if not missing:
        return _produce(ctx, request)
    return _create_then_produce(ctx, request, missing)


async def _create_then_produce(ctx: RequestContext, request: ProduceRequest, names: list[str]) -> Any:
    """Work: the topics are made on a worker thread, then the request is served as any other (its
    answer may still be a pure wait for fsync, which the connection then lets overlap)."""
    await ctx.state.detached.run(ctx.state.topics.auto_create_all, names)
    result = _produce(ctx, request)
    if asyncio.iscoroutine(result):
        return await result
    return result


def _transaction_check(ctx: RequestContext, transactional_id: str, topic: str, partition: int) -> TransactionCheck:
    """The transaction coordinator's check of a transactional batch for this partition (KIP-890)."""
    check, version = ctx.state.transactions.check_produce, ctx.api_version
    return lambda header: check(transactional_id, header.producer_id, header.producer_epoch, topic, partition,
                                version)


def _produce(ctx: RequestContext, request: ProduceRequest) -> Any:
    version = ctx.api_version
    acks = request.acks
    now = ctx.state.clock_ms()
    replicas = ctx.state.replicas
    allow_zstd = version >= FIRST_ZSTD_VERSION
    transactional_id = request.transactional_id
    waits: list[tuple[PartitionProduceResponse, DelayedOperation[AppendOutcome]]] = []
    deferred: list[Deferred] = []
    responses: list[TopicProduceResponse] = []
    for topic in request.topic_data:
        partitions: list[PartitionProduceResponse] = []
        responses.append(TopicProduceResponse(name=topic.name, partition_responses=partitions))
        for part in topic.partition_data:
            if version < FIRST_RECORD_BATCH_VERSION:
                partitions.append(_error(part.index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            if acks not in (0, 1, -1):
                partitions.append(_error(part.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            appending = replicas.append_records(
                topic.name, part.index, part.records, acks=acks, now_ms=now, allow_zstd=allow_zstd,
                transaction=None if transactional_id is None else _transaction_check(ctx, transactional_id,
                                                                                     topic.name, part.index))
            if isinstance(appending, DelayedAppend):
                response, wait = _outcome(part.index, appending)
                partitions.append(response)
                if wait is not None:
                    waits.append((response, wait))
            else:
                partitions.append(_error(part.index, ErrorCode.UNKNOWN_SERVER_ERROR))  # replaced when done
                deferred.append((partitions, len(partitions) - 1, appending))
    result = ProduceResponse(responses=responses, throttle_time_ms=0)
    if deferred:
        return _finish_deferred(result, waits, deferred, acks)
    if acks == 0:
        return None
    if not waits:
        return result
    return waiting(_durable(result, waits))


async def _finish_deferred(result: ProduceResponse,
                           waits: list[tuple[PartitionProduceResponse, DelayedOperation[AppendOutcome]]],
                           deferred: list[Deferred], acks: int) -> ProduceResponse | Waiting | None:
    """Work of a request with batches validated off the loop: their appends; then the answer (none for
    acks=0), or a pure wait for the fsyncs of acks=-1, which lets the connection go on meanwhile."""
    appended = await asyncio.gather(*(work for _, _, work in deferred))
    for (partitions, place, _), appending in zip(deferred, appended, strict=True):
        response, wait = _outcome(partitions[place].index, appending)
        partitions[place] = response
        if wait is not None:
            waits.append((response, wait))
    if acks == 0:
        return None
    if waits:
        return waiting(_durable(result, waits))
    return result


def _durable(result: ProduceResponse, waits: list[tuple[PartitionProduceResponse, DelayedOperation[AppendOutcome]]],
             ) -> Any:
    """The answer of acks=-1, once every partition's append is fsynced: one delayed operation over them
    all (a future, so the connection waits on it without a task)."""
    def answer(outcomes: list[AppendOutcome]) -> ProduceResponse:
        for (response, _), outcome in zip(waits, outcomes, strict=True):
            if outcome.error is not ErrorCode.NONE:  # the flush failed, or the partition went away meanwhile
                response.error_code = outcome.error
                response.base_offset = -1
                response.error_message = outcome.message
        return result

    return all_of([wait for _, wait in waits], answer).future()
