"""Streams groups (KIP-1071) for the console's group pages: StreamsGroupDescribe's answer as JSON-ready rows.

Called on the event loop by `reads` (the group list and a group's page), with the console user's own
LocalClient, so StreamsGroupDescribe authorizes what it shows: DESCRIBE on the GROUP, and DESCRIBE on every
topic its topology names (a group the user may not see is left out of the list, or a 403 on its page).

A streams member runs tasks, not partitions: a task is `<subtopology>_<partition>` (Kafka Streams' TaskId),
active (it processes the task's partitions), standby (it keeps a copy of the task's state) or warm-up (it
builds that copy up before taking the task over). Each member belongs to a process (one Kafka Streams
instance, whatever its thread count).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pybroker.broker.console.local_client import LocalClient
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest

VERSION = 1  # v1 (Kafka 4.4) names the assignor
TASK_KINDS = ("active", "standby", "warmup")


def task_names(task_ids: Iterable[Any]) -> list[str]:
    """`<subtopology>_<partition>` names, by subtopology then partition number."""
    return [f"{s}_{p}" for s, p in sorted((t.subtopology_id, p) for t in task_ids for p in t.partitions)]


def member(m: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id, "host": m.client_host,
        "process_id": m.process_id, "member_epoch": m.member_epoch, "topology_epoch": m.topology_epoch,
        "user_endpoint": None if m.user_endpoint is None else f"{m.user_endpoint.host}:{m.user_endpoint.port}",
        "assignment": []}  # tasks, not partitions: the offsets table names no owner
    for kind in TASK_KINDS:
        row[f"{kind}_tasks"] = task_names(getattr(m.assignment, f"{kind}_tasks"))
        row[f"target_{kind}_tasks"] = task_names(getattr(m.target_assignment, f"{kind}_tasks"))
    row["pending"] = any(row[f"{k}_tasks"] != row[f"target_{k}_tasks"] for k in TASK_KINDS)
    return row


def head(g: Any) -> dict[str, Any]:
    """The group's line: state, epochs, and its topology's subtopologies."""
    topology = g.topology
    return {"group": g.group_id, "state": g.group_state, "group_type": "streams", "protocol_type": "streams",
            "protocol": g.assignor_name, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "topology_epoch": None if topology is None else topology.epoch,
            "subtopologies": [] if topology is None or topology.subtopologies is None else [
                {"subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
                 "changelog_topics": [t.name for t in s.state_changelog_topics],
                 "repartition_source_topics": [t.name for t in s.repartition_source_topics]}
                for s in topology.subtopologies]}


async def describe(client: LocalClient, ids: list[str]) -> dict[str, Any]:
    """StreamsGroupDescribe's answers by group id, for the streams groups among `ids` (another protocol's
    group, or an unknown one, answers GROUP_ID_NOT_FOUND: left out)."""
    if not ids:
        return {}
    response = await client.call(StreamsGroupDescribeRequest(group_ids=ids, include_authorized_operations=False),
                                 VERSION)
    return {g.group_id: g for g in response.groups if g.error_code != ErrorCode.GROUP_ID_NOT_FOUND}
