"""CreateTopics (key 19), versions 0-7.

Creation is local and complete when answered, so `timeout_ms` never expires. It runs on a worker
thread (one mkdir, file and fsync per partition); the connection starts nothing else meanwhile. A
request whose topics together ask for more than `max.partitions.per.request` partitions is refused
whole at once, every topic POLICY_VIOLATION, as Kafka's controller refuses an excessively large batch.
Manual replica assignments are accepted only when they name this node alone. From v5 the answer
carries the partition count, replication factor and every effective config of the new topic, like Kafka;
a refused topic's configs are an empty list (not null), and a validate-only v7 answer carries a fresh topic id,
as Kafka's controller draws one before it validates. A name given twice is answered once, INVALID_REQUEST, and
none of its entries is created (Kafka's ControllerApis drops duplicates the same way).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_topics import create_topics_rule
from pybroker.broker.topics import EXCESSIVE_BATCH_MESSAGE, TopicError
from pybroker.config.definitions import TOPIC
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pybroker.storage.log_manager import TopicInfo

FIRST_CONFIGS_VERSION = 5


def _assignment_count(ctx: RequestContext, topic: object) -> int | None:
    """Partitions implied by manual assignments, or None; `TopicError` if they name other nodes."""
    assignments = getattr(topic, "assignments", None) or []
    if not assignments:
        return None
    for assignment in assignments:
        if list(assignment.broker_ids) != [ctx.state.node_id]:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Replica assignment {list(assignment.broker_ids)} names unknown brokers.")
    return len(assignments)


def _requested_partitions(ctx: RequestContext, request: CreateTopicsRequest) -> int:
    """Partitions the whole request would make (-1 counts as `num.partitions`)."""
    default = ctx.state.topics.new_partitions(-1)
    return sum(len(t.assignments) if getattr(t, "assignments", None)
               else default if t.num_partitions == -1 else max(t.num_partitions, 0)
               for t in request.topics)


@handler(ApiKey.CREATE_TOPICS, versions=(0, 7), authorize=create_topics_rule)
def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> Any:
    if ctx.state.topics.excessive(_requested_partitions(ctx, request)):
        return CreateTopicsResponse(throttle_time_ms=0, topics=[
            CreatableTopicResult(name=t.name, error_code=ErrorCode.POLICY_VIOLATION,
                                 error_message=EXCESSIVE_BATCH_MESSAGE, num_partitions=-1, replication_factor=-1,
                                 configs=[])
            for t in request.topics])
    return ctx.state.detached.run(_create_topics, ctx, request)


def _create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    """Check every topic, create those that pass together (one save of the topic table), then answer."""
    state = ctx.state
    results: list[CreatableTopicResult] = []
    prepared: list[tuple[CreatableTopicResult, Any, int, dict[str, str]]] = []
    counts = Counter(t.name for t in request.topics)
    answered: set[str] = set()
    for topic in request.topics:
        if topic.name in answered:
            continue
        result = CreatableTopicResult(name=topic.name, error_code=ErrorCode.NONE, error_message=None,
                                      num_partitions=-1, replication_factor=-1, configs=[])
        results.append(result)
        if counts[topic.name] > 1:
            answered.add(topic.name)
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            continue
        try:
            assigned = _assignment_count(ctx, topic)
            partitions = topic.num_partitions if assigned is None else assigned
            replication = topic.replication_factor if assigned is None else 1
            if assigned is not None and topic.num_partitions != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments were set.")
            configs = {c.name: c.value for c in topic.configs}
            partitions, overrides = state.topics.prepare(topic.name, partitions, replication, configs)
        except TopicError as exc:
            result.error_code, result.error_message = exc.code, exc.message
            continue
        prepared.append((result, topic, partitions, overrides))
    created: dict[str, TopicInfo | TopicError] = {}
    if not request.validate_only and prepared:
        created = state.topics.create_all([(t.name, partitions, overrides) for _, t, partitions, overrides in prepared])
    for result, topic, partitions, overrides in prepared:
        outcome = created.get(topic.name)
        if isinstance(outcome, TopicError):
            result.error_code, result.error_message = outcome.code, outcome.message
            continue
        if ctx.api_version >= FIRST_CONFIGS_VERSION:
            result.num_partitions = partitions
            result.replication_factor = 1
            result.configs = [
                CreatableTopicConfigs(name=key, value=resolved.text, read_only=False,
                                      config_source=int(resolved.source), is_sensitive=False)
                for key in TOPIC
                for resolved in (state.config.resolve_topic(key, overrides),)
            ]
        if outcome is not None:
            result.topic_id = outcome.topic_id
        elif request.validate_only:
            result.topic_id = uuid.uuid4()
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
