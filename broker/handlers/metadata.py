"""Metadata (key 3), versions 0-13.

One broker (us) leads every partition, with itself as the only replica and ISR, leader epoch 0; the
controller id is our node id. A null topic list (v1+) or an empty one at v0 means every topic. Unknown
topics are created when `auto.create.topics.enable` and the request allow it (always at v0-3), on a worker
thread before the answer is built (at most `max.partitions.per.request` partitions' worth per request),
so they come back at once with their partitions. v10+ name topics by id too.
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_topics import metadata_rule
from pybroker.broker.topics import INTERNAL_TOPICS, TopicError, check_topic_name
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from pybroker.storage.log_manager import TopicInfo

ZERO_UUID = uuid.UUID(int=0)
#: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: no authorizer, all allowed
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12))
UNSET_OPERATIONS = -(2**31)
FIRST_AUTO_CREATE_FLAG_VERSION = 4
#: topics by id (a null name) are served from v12, where the answer's topic name may be null too
FIRST_TOPIC_ID_VERSION = 12


def topic_metadata(ctx: RequestContext, info: TopicInfo, include_ops: bool) -> MetadataResponseTopic:
    """A topic's answer. Each partition's is built with positional arguments (a compiled message's
    constructor parses keywords at four times the cost of the construction) around node lists shared by
    every partition of the answer (the encoder only reads them): a consumer of 1,024 partitions asks for
    them all when it starts."""
    node = ctx.state.node_id
    logs = ctx.state.logs
    offline = logs.offline_dirs
    us: list[int] = [node]
    nobody: list[int] = []
    partitions = []
    for p in range(info.num_partitions):
        directory = logs.dir_of(info.name, p) if offline else None
        if directory is not None and directory in offline:
            # the only replica is on a failed log dir: no leader, as Kafka reports an offline partition
            partitions.append(MetadataResponsePartition(ErrorCode.LEADER_NOT_AVAILABLE, p, -1, 0, us, nobody, us))
            continue
        partitions.append(MetadataResponsePartition(ErrorCode.NONE, p, node, 0, us, us, nobody))
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=info.name, topic_id=info.topic_id,
        is_internal=info.name in INTERNAL_TOPICS, partitions=partitions,
        topic_authorized_operations=TOPIC_OPERATIONS if include_ops else UNSET_OPERATIONS)


def _missing(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, partitions=[])


@handler(ApiKey.METADATA, versions=(0, 13), authorize=metadata_rule)
def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> Any:
    allow_create = request.allow_auto_topic_creation or ctx.api_version < FIRST_AUTO_CREATE_FLAG_VERSION
    if allow_create and request.topics:
        missing = ctx.state.topics.to_auto_create([t.name for t in request.topics])
        if missing:
            return _create_then_answer(ctx, request, missing)
    return _answer(ctx, request)


async def _create_then_answer(ctx: RequestContext, request: MetadataRequest, names: list[str]) -> MetadataResponse:
    await ctx.state.detached.run(ctx.state.topics.auto_create_all, names)
    return _answer(ctx, request)


def _answer(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    state = ctx.state
    version = ctx.api_version
    include_ops = bool(request.include_topic_authorized_operations)
    topics: list[MetadataResponseTopic] = []
    if request.topics is None or (version == 0 and not request.topics):
        topics = [topic_metadata(ctx, info, include_ops) for info in state.logs.topics().values()]
    else:
        for wanted in request.topics:
            # an entry names its topic by id when it carries one, whatever its name says: Java's consumer
            # asks for the ids of a KIP-848 assignment with the name "" (Kafka then ignores the name)
            by_id = wanted.name is None or (wanted.topic_id is not None and wanted.topic_id != ZERO_UUID)
            if by_id and version < FIRST_TOPIC_ID_VERSION:
                # as Kafka: no topic ids before v12; and v10-11 answers cannot carry a null name
                topics.append(_missing("", ErrorCode.INVALID_REQUEST, wanted.topic_id))
                continue
            if by_id:
                info = state.logs.topic_by_id(wanted.topic_id)
                topics.append(topic_metadata(ctx, info, include_ops) if info is not None
                              else _missing(None, ErrorCode.UNKNOWN_TOPIC_ID, wanted.topic_id))
                continue
            assert wanted.name is not None  # by_id above when it is None
            topics.append(_one_topic(ctx, wanted.name, include_ops))
    include_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    host, port = state.address_of(ctx.listener)  # the endpoint of the listener the client came in on
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=state.node_id, host=host, port=port, rack=None)],
        cluster_id=state.cluster_id,
        controller_id=state.node_id,
        topics=topics,
        cluster_authorized_operations=CLUSTER_OPERATIONS if include_cluster_ops else UNSET_OPERATIONS,
        error_code=ErrorCode.NONE,
    )


def _one_topic(ctx: RequestContext, name: str, include_ops: bool) -> MetadataResponseTopic:
    info = ctx.state.topics.get(name)
    if info is not None:
        return topic_metadata(ctx, info, include_ops)
    try:
        check_topic_name(name)
    except TopicError:
        return _missing(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    return _missing(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
