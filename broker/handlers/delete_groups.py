"""DeleteGroups (key 42), versions 0-2: remove empty groups and their offsets (tombstones in the log).

A share group (KIP-932) is deleted by the share service when it has no member (NON_EMPTY_GROUP otherwise),
its share-partitions' state tombstoned in `__share_group_state`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, waiting
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

    shares = [name for name in dict.fromkeys(names) if state.shares.groups.get(name) is not None]
    if not shares:
        return answer(lambda respond: state.groups.coordinator.delete_groups(names, state.clock_ms(), respond), build)
    others = [name for name in names if name not in shares]
    return waiting(_with_share_groups(ctx, shares, others, build))


async def _with_share_groups(ctx: RequestContext, shares: list[str], others: list[str],
                             build: Callable[[dict[str, ErrorCode]], DeleteGroupsResponse]) -> DeleteGroupsResponse:
    """Share groups (KIP-932) are deleted by the share service, their state tombstoned in
    `__share_group_state` and fsynced before the answer; the others by the group coordinator."""
    state = ctx.state
    codes = {name: await state.shares.delete_group(name) for name in shares}
    if others:
        done: asyncio.Future[dict[str, ErrorCode]] = asyncio.get_running_loop().create_future()

        def respond(found: dict[str, ErrorCode]) -> None:
            if not done.done():
                done.set_result(found)

        state.groups.coordinator.delete_groups(others, state.clock_ms(), respond)
        codes.update(await done)
    return build(codes)
