"""Produce (key 0), versions 0-11.

v0-2 carry the old message-set formats: they are advertised (librdkafka turns compression off without
them) and every partition is answered UNSUPPORTED_VERSION, as Kafka 4 does. v3+ carry RecordBatch v2:
each partition's records are validated without decoding records (header, CRC, sizes, codec), offsets are
assigned by patching the batch header in place, and the bytes are appended with one write.

acks=0 sends no response; acks=1 answers once the bytes are in the log (the flush policy decides when
they reach the disk); acks=-1 answers only after the flusher has fsynced them (group commit across all
concurrent requests on the same log dir). Idempotent producers' duplicates get their original offsets.

Unknown topics are auto-created (when `auto.create.topics.enable`) on a worker thread first, then the
request is served as usual; with acks=0 there is no answer to hold back, so creation and append run as a
task of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import Waiting, handler, waiting
from pybroker.broker.logs import get_logger
from pybroker.broker.lookup import resolve_partition_for_write
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from pybroker.protocol.records.batch import RecordsError
from pybroker.protocol.records.record import set_log_append_time
from pybroker.protocol.records.validate import validate_produce_records
from pybroker.storage.errors import LogClosedError, ProducerStateError
from pybroker.storage.log_config import LogConfig

log = get_logger("pybroker.produce")

FIRST_RECORD_BATCH_VERSION = 3
FIRST_ZSTD_VERSION = 7
LOG_APPEND_TIME = "LogAppendTime"


def _error(index: int, code: ErrorCode, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                    log_start_offset=-1, error_message=message)


#: acks=0 requests still creating their topics (a reference, so the tasks are not collected early)
_BACKGROUND: set[asyncio.Task[Any]] = set()


@handler(ApiKey.PRODUCE, versions=(0, 11))
def handle_produce(ctx: RequestContext, request: ProduceRequest) -> Any:
    missing = (ctx.state.topics.to_auto_create([t.name for t in request.topic_data])
               if ctx.api_version >= FIRST_RECORD_BATCH_VERSION else [])
    if not missing:
        return _produce(ctx, request)
    work = _create_then_produce(ctx, request, missing)
    if request.acks != 0:
        return work
    task = asyncio.ensure_future(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return None


async def _create_then_produce(ctx: RequestContext, request: ProduceRequest, names: list[str]) -> Any:
    await asyncio.to_thread(ctx.state.topics.auto_create_all, names)
    result = _produce(ctx, request)
    if isinstance(result, Waiting):
        return await result.awaitable
    return result


def _produce(ctx: RequestContext, request: ProduceRequest) -> Any:
    state = ctx.state
    version = ctx.api_version
    acks = request.acks
    now = state.clock_ms()
    waits: list[tuple[str, PartitionProduceResponse, Awaitable[Any]]] = []
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
            response, wait = _produce_partition(ctx, topic.name, part.index, part.records, acks, now)
            partitions.append(response)
            if wait is not None:
                waits.append((topic.name, response, wait))
    if acks == 0:
        return None
    result = ProduceResponse(responses=responses, throttle_time_ms=0)
    if not waits:
        return result
    return waiting(_await_flushes(ctx, result, waits))


async def _await_flushes(ctx: RequestContext, result: ProduceResponse,
                         waits: list[tuple[str, PartitionProduceResponse, Awaitable[Any]]]) -> ProduceResponse:
    outcomes = await asyncio.gather(*(w for _, _, w in waits), return_exceptions=True)
    for (topic, response, _), outcome in zip(waits, outcomes, strict=True):
        if isinstance(outcome, BaseException):
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
                       now: int) -> tuple[PartitionProduceResponse, Awaitable[Any] | None]:
    state = ctx.state
    target, code = resolve_partition_for_write(state, topic, partition)
    if target is None:
        return _error(partition, code), None
    if records is None or len(records) == 0:
        return _error(partition, ErrorCode.INVALID_RECORD, "no records"), None
    config = target.config
    try:
        validated = validate_produce_records(
            records,
            max_batch_bytes=config.max_message_bytes,
            allow_zstd=ctx.api_version >= FIRST_ZSTD_VERSION,
            require_keys="compact" in config.cleanup_policy,
        )
    except RecordsError as exc:
        return _error(partition, ErrorCode(exc.error_code), str(exc)), None
    if validated.is_transactional:
        return _error(partition, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                      "transactions are not supported yet"), None
    bad_time = _timestamp_problem(validated, config, now)
    if bad_time:
        return _error(partition, ErrorCode.INVALID_TIMESTAMP, bad_time), None
    append_time = -1
    if config.message_timestamp_type == LOG_APPEND_TIME:
        append_time = now
        for pos, header in validated.batches:
            set_log_append_time(records, pos, header, now)
    try:
        result = target.append(records, validated.batches, now_ms=now)
    except ProducerStateError as exc:
        return _error(partition, ErrorCode(exc.error_code), str(exc)), None
    except LogClosedError:  # the topic was deleted meanwhile
        return _error(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
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
        return response, asyncio.wrap_future(flusher.request(target, result.last_offset + 1))
    if target.unflushed_messages >= config.flush_interval_messages:
        flusher.request(target, result.last_offset + 1)
    return response, None


def _timestamp_problem(validated: Any, config: LogConfig, now: int) -> str | None:
    """Kafka's message.timestamp.{before,after}.max.ms checks, on the batch header's timestamps."""
    if config.message_timestamp_type == LOG_APPEND_TIME:
        return None
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    for _, header in validated.batches:
        if header.max_timestamp - now > after:
            return f"timestamp {header.max_timestamp} is more than {after} ms in the future"
        if header.base_timestamp >= 0 and now - header.base_timestamp > before:
            return f"timestamp {header.base_timestamp} is more than {before} ms in the past"
    return None
