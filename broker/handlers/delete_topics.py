"""DeleteTopics (key 20), versions 0-6: by name (v0-5 `topic_names`, v6 `topics`) or by id (v6).

Deletion (a rename and a recursive delete per partition) runs on a worker thread; the connection starts
nothing else meanwhile. Fetches waiting on the deleted partitions are woken afterwards, on the loop, even
when the client went away meanwhile (`broker/detached_work.py`).
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_topics import delete_topics_rule
from pybroker.broker.topics import INTERNAL_TOPICS, change_refused
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from pybroker.storage.errors import UnknownTopicError
from pybroker.storage.log_manager import TopicInfo

ZERO_UUID = uuid.UUID(int=0)


@handler(ApiKey.DELETE_TOPICS, versions=(0, 6), authorize=delete_topics_rule)
def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> Any:
    woken: list[tuple[str, int]] = []

    def wake() -> None:
        for key in woken:
            ctx.state.replicas.notify(key)

    return ctx.state.detached.run(_delete_topics, ctx, request, woken, then=wake)


def _delete_topics(ctx: RequestContext, request: DeleteTopicsRequest,
                   woken: list[tuple[str, int]]) -> DeleteTopicsResponse:
    """Check every name, delete those that pass together (one save of the topic table), then answer."""
    state = ctx.state
    wanted: list[tuple[str | None, uuid.UUID]] = [(name, ZERO_UUID) for name in request.topic_names or []]
    wanted += [(t.name, t.topic_id) for t in request.topics or []]
    results: list[DeletableTopicResult] = []
    doomed: list[tuple[DeletableTopicResult, TopicInfo]] = []
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, topic_id=topic_id, error_code=ErrorCode.NONE)
        results.append(result)
        if name is None:
            by_id = state.logs.topic_by_id(topic_id)
            if by_id is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                result.error_message = "This server does not host this topic ID."
                continue
            name = result.name = by_id.name
        info = state.topics.get(name)
        if not state.config.get("delete.topic.enable"):
            result.error_code = ErrorCode.TOPIC_DELETION_DISABLED
        elif info is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = "This server does not host this topic-partition."
        elif name in INTERNAL_TOPICS:
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            result.error_message = f"Internal topic {name} cannot be deleted."
        else:
            result.topic_id = info.topic_id
            doomed.append((result, info))
    outcomes = state.logs.delete_topics([info.name for _, info in doomed]) if doomed else {}
    for result, info in doomed:
        error = outcomes.get(info.name)
        if error is not None:
            result.error_code, result.error_message = change_refused(error)
        if error is None or not isinstance(error, UnknownTopicError):
            woken.extend((info.name, partition) for partition in range(info.num_partitions))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
