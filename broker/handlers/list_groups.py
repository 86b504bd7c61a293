"""ListGroups (key 16), versions 0-5: every loaded group; v4 filters by state, v5 by type.

A group is of Kafka's "classic" type or, once a member of the consumer protocol (KIP-848) made it, of the
"consumer" type, with that protocol's states (Empty, Assigning, Reconciling, Stable). A streams group
(KIP-1071) is of the "streams" type, with its states (Empty, NotReady, Assigning, Reconciling, Stable); share
groups (KIP-932) are of the "share" type and protocol, Empty or Stable. Filters compare case-insensitively, as
Kafka does.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_groups import list_groups_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse

SHARE = "share"


@handler(ApiKey.LIST_GROUPS, versions=(0, 5), authorize=list_groups_rule)
def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    listed = []
    for group in ctx.state.groups.coordinator.list_groups():
        if states and group.state_name.lower() not in states:
            continue
        if types and group.group_type not in types:
            continue
        listed.append(ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type or "",
                                  group_state=group.state_name, group_type=group.group_type))
    for share in ctx.state.shares.groups.groups.values():  # share groups (KIP-932): type and protocol "share"
        if (states and share.state.lower() not in states) or (types and SHARE not in types):
            continue
        listed.append(ListedGroup(group_id=share.group_id, protocol_type=SHARE, group_state=share.state,
                                  group_type=SHARE))
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=listed)
