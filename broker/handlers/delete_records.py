"""DeleteRecords (key 21), versions 0-2: move partitions' log start offsets forward.

Records below the new start are gone for readers at once (fetches get OFFSET_OUT_OF_RANGE, ListOffsets
earliest answers the new start), the start is checkpointed before the answer so a crash cannot bring
them back, and segments wholly below it are deleted right after. -1 means "up to the high watermark".
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.security.authorization_topics import delete_records_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from pybroker.storage.errors import LogClosedError, OffsetOutOfRange

log = get_logger("pybroker.delete_records")


def _delete(ctx: RequestContext, topic: str, partition: int, offset: int) -> tuple[int, ErrorCode]:
    logs = ctx.state.logs
    target = logs.get_log(topic, partition)
    if target is None:
        return -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not logs.is_online(target):
        return -1, ErrorCode.KAFKA_STORAGE_ERROR  # the new start could not be checkpointed there
    try:
        start = logs.delete_records(topic, partition, offset)
        target.delete_old_segments()
    except OffsetOutOfRange:
        return -1, ErrorCode.OFFSET_OUT_OF_RANGE
    except (KeyError, LogClosedError):
        return -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except OSError as exc:
        logs.report_io_error(target, exc)
        log.error("delete records failed", topic=topic, partition=partition, error=str(exc),
                  client_id=ctx.client_id)
        return -1, ErrorCode.KAFKA_STORAGE_ERROR
    return start, ErrorCode.NONE


def _requested(request: DeleteRecordsRequest) -> dict[str, dict[int, int]]:
    """Offsets by topic and partition. Kafka keys the request by partition, so a partition named twice
    is trimmed once (at the offset named last): a request repeating one partition thousands of times
    must not cost thousands of checkpoint writes."""
    wanted: dict[str, dict[int, int]] = {}
    for topic in request.topics:
        partitions = wanted.setdefault(topic.name, {})
        for p in topic.partitions:
            partitions[p.partition_index] = p.offset
    return wanted


@handler(ApiKey.DELETE_RECORDS, versions=(0, 2), authorize=delete_records_rule)
def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> Any:
    async def run() -> DeleteRecordsResponse:
        topics = []
        for name, offsets in _requested(request).items():
            results = []
            for partition, offset in offsets.items():
                start, code = await ctx.state.detached.run(_delete, ctx, name, partition, offset)
                results.append(DeleteRecordsPartitionResult(partition_index=partition, low_watermark=start,
                                                            error_code=code))
            topics.append(DeleteRecordsTopicResult(name=name, partitions=results))
        return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)

    return run()
