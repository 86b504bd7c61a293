"""FindCoordinator (key 10), versions 0-6: this broker coordinates every group and every transaction.

A group key (type 0) is answered with this node, creating `__consumer_offsets` on first use, as Kafka
does, on a worker thread; a transaction key (type 1) likewise, creating `__transaction_state`
(`transaction.state.log.num.partitions` partitions); COORDINATOR_NOT_AVAILABLE if that creation fails.
An empty transactional id is INVALID_REQUEST; v4+ batches keys. librdkafka also reads the API's
presence as the sign a broker reads lz4 frames.

Authorizes: DESCRIBE on the group or the transactional id (`broker/security/authorization_groups.py`).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.security.authorization_groups import find_coordinator_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from pybroker.storage.errors import StorageError

log = get_logger("pybroker.find_coordinator")

FIRST_BATCHED_VERSION = 4
GROUP_KEY = 0
TRANSACTION_KEY = 1

MESSAGES: dict[ErrorCode, str] = {
    # v1-3 name success too, as Kafka's (the error's own name); v4+ coordinators carry no message then
    ErrorCode.NONE: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator's internal topic could not be created.",
    ErrorCode.INVALID_REQUEST: "Unknown coordinator key type, or an empty transactional id.",
}


def _internal_topic(ctx: RequestContext, key_type: int) -> Any:
    """The internal topic behind a key type (None for an unknown type)."""
    if key_type == GROUP_KEY:
        return ctx.state.groups.offsets_topic
    if key_type == TRANSACTION_KEY:
        return ctx.state.transactions.state_topic
    return None


def _find(ctx: RequestContext, key_type: int, key: str | None) -> ErrorCode:
    topic = _internal_topic(ctx, key_type)
    if topic is None or (key_type == TRANSACTION_KEY and not key):
        return ErrorCode.INVALID_REQUEST
    if not topic.exists():  # its creation failed (see the handler)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE


@handler(ApiKey.FIND_COORDINATOR, versions=(0, 6), authorize=find_coordinator_rule)
def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> Any:
    topic = _internal_topic(ctx, request.key_type)
    if topic is not None and not topic.exists():
        return _create_topic_then_answer(ctx, request, topic)
    return _answer(ctx, request)


async def _create_topic_then_answer(ctx: RequestContext, request: FindCoordinatorRequest,
                                    topic: Any) -> FindCoordinatorResponse:
    """The first group's (or transaction's) request creates the internal topic, on a worker thread."""
    try:
        await topic.ensure_off_loop()
    except (OSError, StorageError) as exc:  # a failing disk, or the partition cap reached
        log.error("cannot create an internal topic", key_type=request.key_type, error=str(exc),
                  client_id=ctx.client_id)
    return _answer(ctx, request)


def _answer(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    state = ctx.state
    # the coordinator's address on the listener the client came in on
    host, port = state.address_of(ctx.listener)

    def where(code: ErrorCode) -> tuple[int, str, int]:
        return (state.node_id, host, port) if code is ErrorCode.NONE else (-1, "", -1)

    if ctx.api_version >= FIRST_BATCHED_VERSION:
        coordinators = []
        for key in request.coordinator_keys:
            code = _find(ctx, request.key_type, key)
            node, h, p = where(code)
            coordinators.append(Coordinator(key=key, node_id=node, host=h, port=p, error_code=code,
                                            error_message=MESSAGES.get(code) if code else None))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    code = _find(ctx, request.key_type, request.key)
    node, h, p = where(code)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=MESSAGES.get(code),
                                   node_id=node, host=h, port=p)
