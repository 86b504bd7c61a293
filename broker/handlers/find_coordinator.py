"""FindCoordinator (key 10), versions 0-6: no coordinator yet, said in the retriable way.

Served now because librdkafka only turns its LZ4 feature on when a broker advertises FindCoordinator
(its probe for brokers new enough to read lz4 frames), so without it librdkafka producers silently
send lz4 topics uncompressed. Until the group coordinator lands, every key (group, transaction,
share group) is answered COORDINATOR_NOT_AVAILABLE, which clients retry; the group-coordinator work
replaces this answer.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

NO_COORDINATOR = "The coordinator is not available: this broker does not run a group or transaction coordinator yet."
FIRST_BATCHED_VERSION = 4


@handler(ApiKey.FIND_COORDINATOR, versions=(0, 6))
def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if ctx.api_version >= FIRST_BATCHED_VERSION:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=NO_COORDINATOR)
            for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=NO_COORDINATOR,
                                   node_id=-1, host="", port=-1)
