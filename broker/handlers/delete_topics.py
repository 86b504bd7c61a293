"""DeleteTopics (key 20), versions 0-6: by name (v0-5 `topic_names`, v6 `topics`) or by id (v6)."""

from __future__ import annotations

import uuid

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.lookup import topic_by_id
from pybroker.broker.topics import INTERNAL_TOPICS
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

ZERO_UUID = uuid.UUID(int=0)


@handler(ApiKey.DELETE_TOPICS, versions=(0, 6))
def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    state = ctx.state
    wanted: list[tuple[str | None, uuid.UUID]] = [(name, ZERO_UUID) for name in request.topic_names or []]
    wanted += [(t.name, t.topic_id) for t in request.topics or []]
    results: list[DeletableTopicResult] = []
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, topic_id=topic_id, error_code=ErrorCode.NONE)
        results.append(result)
        if name is None:
            info = topic_by_id(state, topic_id)
            if info is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            name = result.name = info.name
        info = state.topics.get(name)
        if not state.config.get("delete.topic.enable"):
            result.error_code = ErrorCode.TOPIC_DELETION_DISABLED
        elif info is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif name in INTERNAL_TOPICS:
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            result.error_message = f"Internal topic {name} cannot be deleted."
        else:
            result.topic_id = info.topic_id
            try:
                state.logs.delete_topic(name)
            except OSError as exc:
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                result.error_message = str(exc)
            for partition in range(info.num_partitions):
                state.purgatory.notify((name, partition))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
