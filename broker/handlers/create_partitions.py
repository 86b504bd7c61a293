"""CreatePartitions (key 37), versions 0-3: grow a topic's partition count (never shrink it).

The new partitions are made on a worker thread; the connection starts nothing else meanwhile. A request
whose topics together would add more than `max.partitions.per.request` partitions is refused whole at
once, every topic POLICY_VIOLATION, as Kafka's controller refuses an excessively large batch.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_topics import create_partitions_rule
from pybroker.broker.topics import EXCESSIVE_BATCH_MESSAGE, INTERNAL_TOPICS, change_refused
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from pybroker.storage.errors import InvalidPartitionsError, StorageError, UnknownTopicError


def _check(ctx: RequestContext, name: str, count: int, assignments: list | None) -> tuple[ErrorCode, str | None]:
    info = ctx.state.topics.get(name)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None  # as Kafka: the client shows the code's own text
    if name in INTERNAL_TOPICS:
        return ErrorCode.INVALID_REQUEST, f"Partitions of internal topic {name} cannot be added."
    if count < info.num_partitions:
        # Kafka 4's controller's texts, which kafka-topics --alter prints as they are
        return ErrorCode.INVALID_PARTITIONS, (f"The topic {name} currently has {info.num_partitions} partition(s); "
                                              f"{count} would not be an increase.")
    if count == info.num_partitions:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partition(s)."
    if assignments is not None:
        if len(assignments) != count - info.num_partitions:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Assignments must name each new partition once."
        if any(list(a.broker_ids) != [ctx.state.node_id] for a in assignments):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Assignments name unknown brokers."
    return ErrorCode.NONE, None


def _added(ctx: RequestContext, request: CreatePartitionsRequest) -> int:
    total = 0
    for topic in request.topics:
        info = ctx.state.topics.get(topic.name)
        if info is not None:
            total += max(topic.count - info.num_partitions, 0)
    return total


@handler(ApiKey.CREATE_PARTITIONS, versions=(0, 3), authorize=create_partitions_rule)
def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> Any:
    if ctx.state.topics.excessive(_added(ctx, request)):
        return CreatePartitionsResponse(throttle_time_ms=0, results=[
            CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.POLICY_VIOLATION,
                                        error_message=EXCESSIVE_BATCH_MESSAGE)
            for t in request.topics])
    return ctx.state.detached.run(_create_partitions, ctx, request)


def _create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
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
            except UnknownTopicError as exc:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc)
            except InvalidPartitionsError as exc:
                code, message = ErrorCode.INVALID_PARTITIONS, str(exc)
            except (StorageError, OSError) as exc:
                code, message = change_refused(exc)
        results.append(CreatePartitionsTopicResult(name=topic.name, error_code=code, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
