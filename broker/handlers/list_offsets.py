"""ListOffsets (key 2), versions 0-10.

Special timestamps: -2 earliest (the log start offset), -1 latest (the high watermark, which is also the
last stable offset here), -3 the record with the largest timestamp (v7+), -4 earliest local (= earliest,
we have no tiered storage), -5 earliest pending upload (none: -1). Any other timestamp finds the first
record at or after it through the time index. v0 answers in `old_style_offsets`.
"""

from __future__ import annotations

from collections.abc import Callable

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.lookup import resolve_partition
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from pybroker.storage.log import Log

LEADER_EPOCH = 0
NOT_FOUND = (-1, -1)

#: special timestamp -> (offset, timestamp) of the answer
SPECIAL: dict[int, Callable[[Log], tuple[int, int]]] = {
    -2: lambda log: (log.log_start_offset, -1),
    -1: lambda log: (log.high_watermark, -1),
    -3: lambda log: _max_timestamp(log),
    -4: lambda log: (log.log_start_offset, -1),
    -5: lambda log: NOT_FOUND,
}


def _max_timestamp(log: Log) -> tuple[int, int]:
    timestamp, offset = log.max_timestamp_and_offset()
    return (offset, timestamp) if offset >= 0 else NOT_FOUND


def _lookup(log: Log, timestamp: int) -> tuple[int, int]:
    special = SPECIAL.get(timestamp)
    if special is not None:
        return special(log)
    found = log.offset_for_timestamp(timestamp)
    if found is None:
        return NOT_FOUND
    return found


@handler(ApiKey.LIST_OFFSETS, versions=(0, 10))
def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    topics: list[ListOffsetsTopicResponse] = []
    for topic in request.topics:
        partitions: list[ListOffsetsPartitionResponse] = []
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        for part in topic.partitions:
            answer = ListOffsetsPartitionResponse(partition_index=part.partition_index, timestamp=-1, offset=-1,
                                                  old_style_offsets=[])
            partitions.append(answer)
            log, code = resolve_partition(ctx.state, topic.name, part.partition_index)
            if log is None:
                answer.error_code = code
                continue
            try:
                offset, timestamp = _lookup(log, part.timestamp)
            except OSError as exc:
                ctx.state.logs.report_io_error(log, exc)
                answer.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            answer.offset, answer.timestamp, answer.leader_epoch = offset, timestamp, LEADER_EPOCH
            answer.old_style_offsets = [offset] if offset >= 0 else []
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
