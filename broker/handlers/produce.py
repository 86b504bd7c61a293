"""Produce (key 0), versions 0-12.

v0-2 carry the old message-set formats: they are advertised (librdkafka turns compression off without
them) and every partition is answered UNSUPPORTED_VERSION, as Kafka 4 does. v3+ carry RecordBatch v2:
each partition's batch is validated as Kafka's LogValidator does (header, CRC, sizes, codec, then every
record walked: count, offset deltas, lengths, keys on compacted topics, per-record timestamps), offsets
are assigned by patching the batch header in place, and the bytes are appended with one write.

An uncompressed batch is walked on the event loop (the walk is compiled: ~0.1 us a record). A
compressed one is decompressed (under a cap) and walked in a worker thread, since a small payload can
take a long time to inflate; the handler then returns a coroutine (work still in progress) that
appends once validation is done. Appends to one partition keep the order their requests arrived in,
whichever path each took (`_AppendOrder`).

acks=0 sends no response; acks=1 answers once the bytes are in the log (the flush policy decides when
they reach the disk); acks=-1 answers only after the flusher has fsynced them (group commit across all
concurrent requests on the same log dir). Idempotent producers' duplicates get their original offsets.

Transactional batches are checked with the transaction coordinator before anything is validated further
(`state.transactions.check_produce`, KIP-890 part 1): the producer id and epoch must be the transactional
id's current ones (INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH) and the partition must be in the
open transaction (INVALID_TXN_STATE; TRANSACTION_ABORTABLE from v11), as Kafka 4 refuses it. v12
(transactions v2) adds the partition to the transaction instead, with one fsynced state write first.

Unknown topics are auto-created (when `auto.create.topics.enable`) on a worker thread first, then the
request is served as usual. Work that runs off the loop (creation, validation) is a bare coroutine, so
the connection starts nothing else until the append is done, acks=0 included (the coroutine then
resolves to no answer); the fsync wait of acks=-1 that follows is a pure wait (`waiting`).
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import Waiting, handler, waiting
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.partitions.delayed import DelayedOperation, all_of
from pybroker.broker.partitions.partition import AppendOutcome, Partition
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from pybroker.protocol.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchHeader,
    RecordsError,
    attributes_for,
    parse_header,
    patch_attributes,
    patch_max_timestamp,
    rewrite_crc,
)
from pybroker.protocol.records.codecs import NONE
from pybroker.protocol.records.record import set_log_append_time
from pybroker.protocol.records.validate import (
    TimestampRule,
    ValidatedRecords,
    check_produce_batch,
    check_produce_records,
)
from pybroker.storage.log_config import LogConfig

log = get_logger("pybroker.produce")

FIRST_RECORD_BATCH_VERSION = 3
FIRST_ZSTD_VERSION = 7
LOG_APPEND_TIME_TYPE = "LogAppendTime"

#: decompression and walks of compressed batches; bounded, and apart from the loop's default executor
_VALIDATION_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                      thread_name_prefix="pybroker-validate")

#: (response, the fsync wait of acks=-1 or None)
Outcome = tuple[PartitionProduceResponse, DelayedOperation[AppendOutcome] | None]


class _AppendOrder:
    """Appends to a partition happen in the order their requests arrived, though some are validated in
    a worker thread: each deferred append waits for the one before it on the same partition, and an
    append on the loop defers itself while one is pending."""

    def __init__(self) -> None:
        self._tails: dict[tuple[str, int], asyncio.Future[None]] = {}

    def busy(self, target: Partition) -> bool:
        return target.key in self._tails

    def enter(self, target: Partition) -> tuple[asyncio.Future[None] | None, asyncio.Future[None]]:
        """(the append to wait for first, this append's own marker); call `leave` with the marker."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        previous = self._tails.get(target.key)
        self._tails[target.key] = mine
        return previous, mine

    def leave(self, target: Partition, mine: asyncio.Future[None]) -> None:
        mine.set_result(None)
        if self._tails.get(target.key) is mine:
            del self._tails[target.key]


_ORDER = _AppendOrder()


def _error(index: int, code: ErrorCode, message: str | None = None,
           record_errors: tuple[tuple[int, str], ...] = ()) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                    log_start_offset=-1, error_message=message, record_errors=[
                                        BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=text)
                                        for i, text in record_errors])


def _refused(index: int, exc: RecordsError) -> Outcome:
    """A batch the validator refused: its code and message, and the records to blame (Produce v8+)."""
    return _error(index, ErrorCode(exc.error_code), exc.message, exc.record_errors), None


@handler(ApiKey.PRODUCE, versions=(0, 12))
def handle_produce(ctx: RequestContext, request: ProduceRequest) -> Any:
    missing = (ctx.state.topics.to_auto_create([t.name for t in request.topic_data])
               if ctx.api_version >= FIRST_RECORD_BATCH_VERSION else [])
    if not missing:
        return _produce(ctx, request)
    return _create_then_produce(ctx, request, missing)


async def _create_then_produce(ctx: RequestContext, request: ProduceRequest, names: list[str]) -> Any:
    """Work: the topics are made on a worker thread, then the request is served as any other (its
    answer may still be a pure wait for fsync, which the connection then lets overlap)."""
    await asyncio.to_thread(ctx.state.topics.auto_create_all, names)
    result = _produce(ctx, request)
    if asyncio.iscoroutine(result):
        return await result
    return result


def _produce(ctx: RequestContext, request: ProduceRequest) -> Any:
    version = ctx.api_version
    acks = request.acks
    now = ctx.state.clock_ms()
    done: list[tuple[str, Outcome]] = []
    deferred: list[tuple[str, list[PartitionProduceResponse], int, Coroutine[Any, Any, Outcome]]] = []
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
            outcome = _produce_partition(ctx, topic.name, part.index, part.records, acks, now,
                                         request.transactional_id)
            if isinstance(outcome, tuple):
                partitions.append(outcome[0])
                done.append((topic.name, outcome))
            else:
                partitions.append(_error(part.index, ErrorCode.UNKNOWN_SERVER_ERROR))  # replaced when done
                deferred.append((topic.name, partitions, len(partitions) - 1, outcome))
    result = ProduceResponse(responses=responses, throttle_time_ms=0)
    if deferred:
        return _finish_deferred(ctx, result, done, deferred, acks)
    if acks == 0:
        return None
    waits = [(response, wait) for _, (response, wait) in done if wait is not None]
    if not waits:
        return result
    return waiting(_durable(result, waits))


async def _finish_deferred(ctx: RequestContext, result: ProduceResponse, done: list[tuple[str, Outcome]],
                           deferred: list[tuple[str, list[PartitionProduceResponse], int,
                                                Coroutine[Any, Any, Outcome]]],
                           acks: int) -> ProduceResponse | Waiting | None:
    """Work of a request with batches validated off the loop: their appends; then the answer (none for
    acks=0), or a pure wait for the fsyncs of acks=-1, which lets the connection go on meanwhile."""
    outcomes = await asyncio.gather(*(work for _, _, _, work in deferred))
    waits = [(response, wait) for _, (response, wait) in done if wait is not None]
    for (_, partitions, index, _), (response, wait) in zip(deferred, outcomes, strict=True):
        partitions[index] = response
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


def _produce_partition(ctx: RequestContext, topic: str, partition: int, records: Any, acks: int,
                       now: int, transactional_id: str | None = None) -> Outcome | Coroutine[Any, Any, Outcome]:
    """The partition's outcome, or a coroutine that yields it once validation off the loop is done."""
    state = ctx.state
    target, code = state.replicas.resolve_for_write(topic, partition)
    if target is None:
        return _error(partition, code), None
    if records is None or len(records) == 0:
        return _error(partition, ErrorCode.INVALID_RECORD, "no records"), None
    config = target.config
    try:
        header = check_produce_batch(records, max_batch_bytes=config.max_message_bytes,
                                     allow_zstd=ctx.api_version >= FIRST_ZSTD_VERSION)
    except RecordsError as exc:
        return _refused(partition, exc)
    if header.is_transactional:
        if transactional_id is None:
            return _error(partition, ErrorCode.INVALID_RECORD,
                          "a transactional batch in a request without a transactional id"), None
        verdict = state.transactions.check_produce(transactional_id, header.producer_id, header.producer_epoch,
                                                   topic, partition, ctx.api_version)
        if not isinstance(verdict, ErrorCode):
            return _verified_then_produce(ctx, verdict, target, topic, partition, records, header, acks, now)
        if verdict is not ErrorCode.NONE:
            return _error(partition, verdict, _TXN_MESSAGES.get(verdict)), None
    return _checked_produce(ctx, target, topic, partition, records, header, acks, now)


#: why a transactional batch was refused, for the client's log
_TXN_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.INVALID_TXN_STATE: "the partition was not added to the transaction",
    ErrorCode.TRANSACTION_ABORTABLE: "the partition was not added to the transaction",
    ErrorCode.INVALID_PRODUCER_EPOCH: "the producer epoch is not the transactional id's current one",
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: "the producer id is not the transactional id's",
    ErrorCode.NOT_ENOUGH_REPLICAS: "the transaction coordinator cannot verify the partition yet: retry",
}


async def _verified_then_produce(ctx: RequestContext, verdict: Awaitable[ErrorCode], target: Partition, topic: str,
                                 partition: int, records: Any, header: BatchHeader, acks: int,
                                 now: int) -> Outcome:
    """Produce v12: the partition joins the transaction (a fsynced state write) before the append."""
    code = await verdict
    if code is not ErrorCode.NONE:
        return _error(partition, code, _TXN_MESSAGES.get(code)), None
    target, code = ctx.state.replicas.resolve_for_write(topic, partition)  # fresh: it may have moved meanwhile
    if target is None:
        return _error(partition, code), None
    outcome = _checked_produce(ctx, target, topic, partition, records, header, acks, now)
    if isinstance(outcome, tuple):
        return outcome
    return await outcome


def _checked_produce(ctx: RequestContext, target: Partition, topic: str, partition: int, records: Any,
                     header: BatchHeader, acks: int, now: int) -> Outcome | Coroutine[Any, Any, Outcome]:
    config = target.config
    check = functools.partial(check_produce_records, records, header,
                              require_keys="compact" in config.cleanup_policy,
                              timestamps=_timestamp_rule(config, now), partition_name=f"{topic}-{partition}")
    if header.compression != NONE:
        return _validate_then_append(ctx, target, topic, partition, records, check, acks, now)
    try:
        validated = check()
    except RecordsError as exc:
        return _refused(partition, exc)
    if _ORDER.busy(target):  # an earlier append to this partition is still being validated
        return _append_in_turn(ctx, target, topic, partition, records, validated, acks, now)
    return _append(ctx, target, topic, partition, records, validated, acks, now)


def _validate_then_append(ctx: RequestContext, target: Partition, topic: str, partition: int, records: Any,
                          check: functools.partial[ValidatedRecords], acks: int,
                          now: int) -> Coroutine[Any, Any, Outcome]:
    """Validation in a worker thread, then the append in this partition's turn (taken now, on the loop)."""
    previous, mine = _ORDER.enter(target)

    async def run() -> Outcome:
        try:
            try:
                validated = await asyncio.get_running_loop().run_in_executor(_VALIDATION_POOL, check)
            except RecordsError as exc:
                return _refused(partition, exc)
            if previous is not None:
                await previous
            return _append_again(ctx, topic, partition, records, validated, acks, now)
        finally:
            _ORDER.leave(target, mine)

    return run()


def _append_in_turn(ctx: RequestContext, target: Partition, topic: str, partition: int, records: Any,
                    validated: ValidatedRecords, acks: int, now: int) -> Coroutine[Any, Any, Outcome]:
    """An append validated on the loop that must wait for an earlier one still in a worker thread."""
    previous, mine = _ORDER.enter(target)

    async def run() -> Outcome:
        try:
            if previous is not None:
                await previous
            return _append_again(ctx, topic, partition, records, validated, acks, now)
        finally:
            _ORDER.leave(target, mine)

    return run()


def _append_again(ctx: RequestContext, topic: str, partition: int, records: Any, validated: ValidatedRecords,
                  acks: int, now: int) -> Outcome:
    """An append after a wait: the partition is looked up again (its log may have moved, or gone)."""
    target, code = ctx.state.replicas.resolve_for_write(topic, partition)
    if target is None:
        return _error(partition, code, "the partition went away during the append"), None
    return _append(ctx, target, topic, partition, records, validated, acks, now)


def _timestamp_rule(config: LogConfig, now: int) -> TimestampRule:
    return TimestampRule(now_ms=now, before_max_ms=config.message_timestamp_before_max_ms,
                         after_max_ms=config.message_timestamp_after_max_ms,
                         log_append_time=config.message_timestamp_type == LOG_APPEND_TIME_TYPE)


def _stamp_timestamps(records: Any, header: BatchHeader, validated: ValidatedRecords, config: LogConfig,
                      now: int) -> tuple[Any, int]:
    """Kafka's `setMaxTimestamp` on the batch: the log append time on LogAppendTime topics, else the
    largest record timestamp (and CreateTime). Returns (the buffer to append, the log append time or -1)."""
    append_time = now if config.message_timestamp_type == LOG_APPEND_TIME_TYPE else -1
    wanted = (LOG_APPEND_TIME, now) if append_time >= 0 else (CREATE_TIME, validated.max_timestamp)
    if (header.timestamp_type, header.max_timestamp) == wanted:
        return records, append_time
    if isinstance(records, bytes) or (isinstance(records, memoryview) and records.readonly):
        records = bytearray(records)
    if append_time >= 0:
        set_log_append_time(records, 0, header, now)
    else:
        patch_attributes(records, 0, attributes_for(
            header.compression, CREATE_TIME, is_transactional=header.is_transactional,
            is_control=header.is_control, has_delete_horizon=header.has_delete_horizon))
        patch_max_timestamp(records, 0, validated.max_timestamp)
        rewrite_crc(records, 0)
    validated.batches = [(0, parse_header(records, 0))]
    return records, append_time


def _append(ctx: RequestContext, target: Partition, topic: str, partition: int, records: Any,
            validated: ValidatedRecords, acks: int, now: int) -> Outcome:
    records, append_time = _stamp_timestamps(records, validated.batches[0][1], validated, target.config, now)
    appending = target.append(records, validated.batches, acks=acks, now_ms=now,
                              record_count=validated.record_count)
    if appending.done:
        outcome = appending.value
        if outcome.error is not ErrorCode.NONE:
            return _error(partition, outcome.error, outcome.message), None
        return _answer(partition, outcome, append_time), None
    # acks=-1: the offsets are known now, the answer waits for the fsync
    return _answer(partition, appending.outcome, append_time), appending


def _answer(partition: int, outcome: AppendOutcome, append_time: int) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=partition, error_code=ErrorCode.NONE, base_offset=outcome.base_offset,
                                    log_append_time_ms=append_time, log_start_offset=outcome.log_start_offset)
