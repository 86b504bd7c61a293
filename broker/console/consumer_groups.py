"""The KIP-848 groups page: consumer-protocol groups with their epochs, assignor, and each member's
subscription, epoch, assignment and pending target assignment (ConsumerGroupDescribe).

Called on the event loop by the console's router (`admin_routes`). Classic groups stay on the Consumer
groups page (`reads`); this page shows what only the consumer protocol has: the group epoch (bumped by
every membership or subscription change), the assignment epoch (the group epoch the current target
assignment was computed for; behind the group epoch while the server assignor has not caught up), and per
member its epoch, what it subscribed to (topic names or a regex), the partitions it owns, and the target
assignment it is moving to when that differs (partitions still being revoked from other members).

| read | Kafka API | authorizes |
| --- | --- | --- |
| `groups` | ListGroups (type `consumer`), ConsumerGroupDescribe | DESCRIBE on each GROUP (others are left out) |
| `group` | ConsumerGroupDescribe | DESCRIBE on the GROUP |
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.params import ConsoleError
from pybroker.broker.console.reads import error_name, refused
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from pybroker.protocol.messages.list_groups import ListGroupsRequest

VERSION = 1
LIST_GROUPS_VERSION = 5  # the first with a type filter
MAX_LISTED = 500
#: KIP-1099's member types (v1): how the member joined
MEMBER_TYPES = {-1: "unknown", 0: "classic", 1: "consumer"}


def _partitions(assignment: Any) -> list[str]:
    return sorted(f"{t.topic_name}-{p}" for t in assignment.topic_partitions for p in t.partitions)


def _member(m: Any) -> dict[str, Any]:
    owned, target = _partitions(m.assignment), _partitions(m.target_assignment)
    return {"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
            "host": m.client_host, "member_epoch": m.member_epoch, "member_type": MEMBER_TYPES.get(m.member_type,
                                                                                                    str(m.member_type)),
            "subscribed_topics": sorted(m.subscribed_topic_names), "subscribed_regex": m.subscribed_topic_regex,
            "assignment": owned, "target_assignment": target, "pending": owned != target}


async def groups(client: LocalClient) -> list[dict[str, Any]]:
    listed = await client.call(ListGroupsRequest(types_filter=["consumer"]), LIST_GROUPS_VERSION)
    if listed.error_code:
        raise refused(listed.error_code, "ListGroups")
    ids = sorted(g.group_id for g in listed.groups)[:MAX_LISTED]
    if not ids:
        return []
    response = await client.call(ConsumerGroupDescribeRequest(group_ids=ids), VERSION)
    rows = []
    for g in sorted(response.groups, key=lambda g: g.group_id):
        members = [_member(m) for m in g.members]
        rows.append({"group": g.group_id, "error": error_name(g.error_code) if g.error_code else None,
                     "state": g.group_state, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                     "assignor": g.assignor_name, "members": len(members),
                     "pending_members": sum(m["pending"] for m in members)})
    return rows


async def group(client: LocalClient, group_id: str) -> dict[str, Any]:
    response = await client.call(ConsumerGroupDescribeRequest(group_ids=[group_id]), VERSION)
    g = response.groups[0]
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        raise ConsoleError(404, f"{group_id} is not a consumer-protocol (KIP-848) group"
                                + (f" ({g.error_message})" if g.error_message else ""))
    if g.error_code:
        raise refused(g.error_code, f"group {group_id}", g.error_message)
    members = sorted((_member(m) for m in g.members), key=lambda m: m["member_id"])
    return {"group": g.group_id, "state": g.group_state, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name,
            "assignment_pending": g.assignment_epoch < g.group_epoch or any(m["pending"] for m in members),
            "members": members}
