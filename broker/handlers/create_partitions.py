"""CreatePartitions (key 37), versions 0-3: grow a topic's partition count (never shrink it)."""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.topics import INTERNAL_TOPICS
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)


def _check(ctx: RequestContext, name: str, count: int, assignments: list | None) -> tuple[ErrorCode, str | None]:
    info = ctx.state.topics.get(name)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    if name in INTERNAL_TOPICS:
        return ErrorCode.INVALID_REQUEST, f"Partitions of internal topic {name} cannot be added."
    if count < info.num_partitions:
        return ErrorCode.INVALID_PARTITIONS, (f"Topic currently has {info.num_partitions} partitions, which is "
                                              f"higher than the requested {count}.")
    if count == info.num_partitions:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partitions."
    if assignments is not None:
        if len(assignments) != count - info.num_partitions:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Assignments must name each new partition once."
        if any(list(a.broker_ids) != [ctx.state.node_id] for a in assignments):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Assignments name unknown brokers."
    return ErrorCode.NONE, None


@handler(ApiKey.CREATE_PARTITIONS, versions=(0, 3))
def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    results: list[CreatePartitionsTopicResult] = []
    seen: set[str] = set()
    for topic in request.topics:
        code: ErrorCode
        message: str | None
        if topic.name in seen:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
        else:
            seen.add(topic.name)
            code, message = _check(ctx, topic.name, topic.count, topic.assignments)
        if code == ErrorCode.NONE and not request.validate_only:
            try:
                ctx.state.logs.add_partitions(topic.name, topic.count)
            except OSError as exc:
                code, message = ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
        results.append(CreatePartitionsTopicResult(name=topic.name, error_code=code, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
