"""DeleteGroups (key 42), versions 0-2: remove empty groups and their offsets (tombstones in the log)."""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.deferred_responses import answer
from pybroker.broker.security.authorization_groups import delete_groups_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)


@handler(ApiKey.DELETE_GROUPS, versions=(0, 2), authorize=delete_groups_rule)
def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> Any:
    state = ctx.state
    names = list(request.groups_names)

    def build(codes: dict[str, ErrorCode]) -> DeleteGroupsResponse:
        return DeleteGroupsResponse(throttle_time_ms=0, results=[
            DeletableGroupResult(group_id=name, error_code=codes[name]) for name in dict.fromkeys(names)])

    return answer(lambda respond: state.groups.coordinator.delete_groups(names, state.clock_ms(), respond), build)
