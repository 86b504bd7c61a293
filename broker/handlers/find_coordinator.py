"""FindCoordinator (key 10), versions 0-6: this broker coordinates every group.

A group key is answered with this node (creating `__consumer_offsets` on first use, as Kafka does, on a
worker thread; COORDINATOR_NOT_AVAILABLE if that fails); a
transaction key with COORDINATOR_NOT_AVAILABLE, since transactions are not served; v4+ batches keys.
librdkafka also reads the API's presence as the sign a broker reads lz4 frames.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.logs import get_logger
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
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "This broker does not run a transaction coordinator.",
    ErrorCode.INVALID_REQUEST: "Unknown coordinator key type.",
}


def _find(ctx: RequestContext, key_type: int) -> ErrorCode:
    if key_type == TRANSACTION_KEY:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if key_type != GROUP_KEY:
        return ErrorCode.INVALID_REQUEST
    if not ctx.state.groups.offsets_topic.exists():  # its creation failed (see the handler)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE


@handler(ApiKey.FIND_COORDINATOR, versions=(0, 6))
def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> Any:
    if request.key_type == GROUP_KEY and not ctx.state.groups.offsets_topic.exists():
        return _create_offsets_topic_then_answer(ctx, request)
    return _answer(ctx, request)


async def _create_offsets_topic_then_answer(ctx: RequestContext,
                                            request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    """The first group's request creates the offsets topic (its partitions, on a worker thread)."""
    try:
        await asyncio.to_thread(ctx.state.groups.offsets_topic.ensure)
    except (OSError, StorageError) as exc:  # a failing disk, or the partition cap reached
        log.error("cannot create the offsets topic", error=str(exc), client_id=ctx.client_id)
    return _answer(ctx, request)


def _answer(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    state = ctx.state
    code = _find(ctx, request.key_type)
    found = code is ErrorCode.NONE
    # the coordinator's address on the listener the client came in on
    node, host, port = (state.node_id, *state.address_of(ctx.listener)) if found else (-1, "", -1)
    message = MESSAGES.get(code)
    if ctx.api_version >= FIRST_BATCHED_VERSION:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=node, host=host, port=port, error_code=code, error_message=message)
            for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                   node_id=node, host=host, port=port)
