"""OffsetDelete (key 47), version 0: forget a group's committed offsets for some partitions.

Refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) for topics a live consumer group still consumes.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.deferred_responses import answer
from pybroker.broker.security.authorization_groups import offset_delete_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)


@handler(ApiKey.OFFSET_DELETE, versions=(0, 0), authorize=offset_delete_rule)
def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> Any:
    state = ctx.state
    keys = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]

    def build(result: tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]) -> OffsetDeleteResponse:
        error, codes = result
        topics = [] if error else [OffsetDeleteResponseTopic(name=t.name, partitions=[
            OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                          error_code=codes.get((t.name, p.partition_index), ErrorCode.NONE))
            for p in t.partitions]) for t in request.topics]
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=topics)

    return answer(lambda respond: state.groups.coordinator.delete_offsets(
        request.group_id, keys, state.clock_ms(), lambda error, codes: respond((error, codes))), build)
