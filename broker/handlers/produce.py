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
from pybroker.broker.flush_wait import flushed
from pybroker.broker.logs import get_logger
from pybroker.broker.lookup import resolve_partition_for_write
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
from pybroker.storage.errors import LogClosedError, ProducerStateError
from pybroker.storage.log_config import LogConfig

log = get_logger("pybroker.produce")

FIRST_RECORD_BATCH_VERSION = 3
FIRST_ZSTD_VERSION = 7
LOG_APPEND_TIME_TYPE = "LogAppendTime"

#: decompression and walks of compressed batches; bounded, and apart from the loop's default executor
_VALIDATION_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                      thread_name_prefix="pybroker-validate")

#: (response, the fsync wait of acks=-1 or None)
Outcome = tuple[PartitionProduceResponse, Awaitable[Any] | None]


class _AppendOrder:
    """Appends to a partition happen in the order their requests arrived, though some are validated in
    a worker thread: each deferred append waits for the one before it on the same partition, and an
    append on the loop defers itself while one is pending."""

    def __init__(self) -> None:
        self._tails: dict[int, asyncio.Future[None]] = {}

    def busy(self, target: Any) -> bool:
        return id(target) in self._tails

    def enter(self, target: Any) -> tuple[asyncio.Future[None] | None, asyncio.Future[None]]:
        """(the append to wait for first, this append's own marker); call `leave` with the marker."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        previous = self._tails.get(id(target))
        self._tails[id(target)] = mine
        return previous, mine

    def leave(self, target: Any, mine: asyncio.Future[None]) -> None:
        mine.set_result(None)
        if self._tails.get(id(target)) is mine:
            del self._tails[id(target)]


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
    waits = [(topic, response, wait) for topic, (response, wait) in done if wait is not None]
    if not waits:
        return result
    return waiting(_await_flushes(ctx, result, waits))


async def _finish_deferred(ctx: RequestContext, result: ProduceResponse, done: list[tuple[str, Outcome]],
                           deferred: list[tuple[str, list[PartitionProduceResponse], int,
                                                Coroutine[Any, Any, Outcome]]],
                           acks: int) -> ProduceResponse | Waiting | None:
    """Work of a request with batches validated off the loop: their appends; then the answer (none for
    acks=0), or a pure wait for the fsyncs of acks=-1, which lets the connection go on meanwhile."""
    outcomes = await asyncio.gather(*(work for _, _, _, work in deferred))
    waits = [(topic, response, wait) for topic, (response, wait) in done if wait is not None]
    for (topic, partitions, index, _), (response, wait) in zip(deferred, outcomes, strict=True):
        partitions[index] = response
        if wait is not None:
            waits.append((topic, response, wait))
    if acks == 0:
        return None
    if waits:
        return waiting(_await_flushes(ctx, result, waits))
    return result


async def _await_flushes(ctx: RequestContext, result: ProduceResponse,
                         waits: list[tuple[str, PartitionProduceResponse, Awaitable[Any]]]) -> ProduceResponse:
    outcomes = await asyncio.gather(*(w for _, _, w in waits), return_exceptions=True)
    for (topic, response, _), outcome in zip(waits, outcomes, strict=True):
        if isinstance(outcome, LogClosedError):
            # the topic was deleted while its batch waited for fsync: as Kafka's delayed produce answers
            # once the partition is gone, not a disk failure
            response.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            response.base_offset = -1
            response.error_message = "the partition was deleted before the records were flushed"
        elif isinstance(outcome, BaseException):
            log.error("flush failed", topic=topic, partition=response.index, client_id=ctx.client_id,
                      error=repr(outcome))
            target = ctx.state.logs.get_log(topic, response.index)
            if target is not None and isinstance(outcome, OSError):
                ctx.state.logs.report_io_error(target, outcome)
            response.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            response.base_offset = -1
            response.error_message = "the log could not be flushed to disk"
    return result


def _produce_partition(ctx: RequestContext, topic: str, partition: int, records: Any, acks: int,
                       now: int, transactional_id: str | None = None) -> Outcome | Coroutine[Any, Any, Outcome]:
    """The partition's outcome, or a coroutine that yields it once validation off the loop is done."""
    state = ctx.state
    target, code = resolve_partition_for_write(state, topic, partition)
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


async def _verified_then_produce(ctx: RequestContext, verdict: Awaitable[ErrorCode], target: Any, topic: str,
                                 partition: int, records: Any, header: BatchHeader, acks: int,
                                 now: int) -> Outcome:
    """Produce v12: the partition joins the transaction (a fsynced state write) before the append."""
    code = await verdict
    if code is not ErrorCode.NONE:
        return _error(partition, code, _TXN_MESSAGES.get(code)), None
    outcome = _checked_produce(ctx, target, topic, partition, records, header, acks, now)
    if isinstance(outcome, tuple):
        return outcome
    return await outcome


def _checked_produce(ctx: RequestContext, target: Any, topic: str, partition: int, records: Any,
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


def _validate_then_append(ctx: RequestContext, target: Any, topic: str, partition: int, records: Any,
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
            return _append(ctx, target, topic, partition, records, validated, acks, now)
        finally:
            _ORDER.leave(target, mine)

    return run()


def _append_in_turn(ctx: RequestContext, target: Any, topic: str, partition: int, records: Any,
                    validated: ValidatedRecords, acks: int, now: int) -> Coroutine[Any, Any, Outcome]:
    """An append validated on the loop that must wait for an earlier one still in a worker thread."""
    previous, mine = _ORDER.enter(target)

    async def run() -> Outcome:
        try:
            if previous is not None:
                await previous
            return _append(ctx, target, topic, partition, records, validated, acks, now)
        finally:
            _ORDER.leave(target, mine)

    return run()


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


def _append(ctx: RequestContext, target: Any, topic: str, partition: int, records: Any,
            validated: ValidatedRecords, acks: int, now: int) -> Outcome:
    state = ctx.state
    config = target.config
    records, append_time = _stamp_timestamps(records, validated.batches[0][1], validated, config, now)
    try:
        try:
            result = target.append(records, validated.batches, now_ms=now)
        except LogClosedError:  # moved to another log dir as it waited for the swap: nothing was written
            moved = state.logs.get_log(topic, partition)
            if moved is None or moved is target:
                raise
            target = moved
            result = target.append(records, validated.batches, now_ms=now)
    except ProducerStateError as exc:
        return _error(partition, ErrorCode(exc.error_code), str(exc)), None
    except LogClosedError:  # deleted (or its dir gone offline) meanwhile
        return _error(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      "the partition went away during the append"), None
    except OSError as exc:
        log.error("append failed", topic=topic, partition=partition, error=str(exc), client_id=ctx.client_id)
        state.logs.report_io_error(target, exc)
        return _error(partition, ErrorCode.KAFKA_STORAGE_ERROR, "the log could not be written"), None
    if not result.duplicate:
        state.purgatory.notify((topic, partition))
        state.traffic.appended(topic, len(records), validated.record_count)
    response = PartitionProduceResponse(
        index=partition, error_code=ErrorCode.NONE, base_offset=result.base_offset,
        log_append_time_ms=append_time, log_start_offset=result.log_start_offset)
    flusher = state.logs.flusher_for(target)
    if acks == -1:
        return response, flushed(flusher, target, result.last_offset + 1)
    if target.unflushed_messages >= config.flush_interval_messages:
        flusher.request(target, result.last_offset + 1)
    return response, None
