"""ListOffsets (key 2), versions 0-10.

Special timestamps: -2 earliest (the log start offset), -1 latest (the high watermark; under
read_committed (v2+) the last stable offset), -3 the record with the largest timestamp (v7+), -4 earliest
local (= earliest, we have no tiered storage), -5 earliest pending upload (none: -1). Any other timestamp
finds the first record at or after it through the time index. v0 answers in `old_style_offsets`.

As Kafka (`Partition.fetchOffsetForTimestamp`), every answer but earliest (-2, -4) must lie below the last
fetchable offset (the LSO under read_committed, else the high watermark; v0-1 carry no isolation level
and see the log end); an offset at or past it is answered as not found (-1). A special timestamp sent at a
version older than the one that introduced it (`FIRST_VERSION_OF`: KIP-734's -3 at v7, KIP-1005's -4 and -5
at v8 and v9) is answered UNSUPPORTED_VERSION for its partition, as Kafka 4.4 does.
"""

from __future__ import annotations

from collections.abc import Callable

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_topics import list_offsets_rule
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
READ_COMMITTED = 1
FIRST_ISOLATION_VERSION = 2
LATEST = -1
#: answers exempt from the last-fetchable cap: earliest, and earliest local (the same offset here)
UNCAPPED = frozenset((-2, -4))

#: special timestamp -> the first version that may ask for it
FIRST_VERSION_OF = {-3: 7, -4: 8, -5: 9}
#: special timestamp -> (offset, timestamp) of the answer
SPECIAL: dict[int, Callable[[Log], tuple[int, int]]] = {
    -2: lambda log: (log.log_start_offset, -1),
    -3: lambda log: _max_timestamp(log),
    -4: lambda log: (log.log_start_offset, -1),
    -5: lambda log: NOT_FOUND,
}


def _max_timestamp(log: Log) -> tuple[int, int]:
    timestamp, offset = log.max_timestamp_and_offset()
    return (offset, timestamp) if offset >= 0 else NOT_FOUND


def _lookup(log: Log, timestamp: int, read_committed: bool) -> tuple[int, int]:
    fetchable = log.last_stable_offset if read_committed else log.high_watermark
    if timestamp == LATEST:
        return fetchable, -1
    special = SPECIAL.get(timestamp)
    found = special(log) if special is not None else log.offset_for_timestamp(timestamp)
    if found is None or (timestamp not in UNCAPPED and found[0] >= fetchable):
        return NOT_FOUND
    return found


@handler(ApiKey.LIST_OFFSETS, versions=(0, 10), authorize=list_offsets_rule)
def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    read_committed = ctx.api_version >= FIRST_ISOLATION_VERSION and request.isolation_level == READ_COMMITTED
    topics: list[ListOffsetsTopicResponse] = []
    for topic in request.topics:
        partitions: list[ListOffsetsPartitionResponse] = []
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        for part in topic.partitions:
            answer = ListOffsetsPartitionResponse(partition_index=part.partition_index, timestamp=-1, offset=-1,
                                                  old_style_offsets=[])
            partitions.append(answer)
            target, code = ctx.state.replicas.resolve(topic.name, part.partition_index)
            if target is not None and ctx.api_version < FIRST_VERSION_OF.get(part.timestamp, 0):
                target, code = None, ErrorCode.UNSUPPORTED_VERSION
            if target is None:
                answer.error_code = code
                continue
            log = target.log
            try:
                offset, timestamp = _lookup(log, part.timestamp, read_committed)
            except OSError as exc:
                ctx.state.logs.report_io_error(log, exc)
                answer.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            # no record at or after the timestamp: no offset, so no epoch either (-1, as Kafka)
            answer.offset, answer.timestamp = offset, timestamp
            answer.leader_epoch = LEADER_EPOCH if offset >= 0 else -1
            answer.old_style_offsets = [offset] if offset >= 0 else []
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
