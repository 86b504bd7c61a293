"""What `pybroker share-groups ...` asks the broker (KIP-932): ListGroups (type "share"), ShareGroupDescribe,
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups, as plain rows:
the figures kafka-share-groups shows (each share-partition's start offset and lag, members, state).

Resets are planned first (`plan_reset`: one row per partition with its start offset now and the new one)
and written only on request, as kafka-share-groups' dry run and `--execute`; the group must be empty.
"""

from __future__ import annotations

from typing import Any

from pybroker.clients.admin.topics import EARLIEST, LATEST, check, error_name, list_offsets, metadata
from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from pybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from pybroker.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from pybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from pybroker.protocol.messages.list_groups import ListGroupsRequest
from pybroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest

SHARE = "share"


def list_share_groups(client: WireClient) -> list[dict[str, Any]]:
    response = client.call(ListGroupsRequest(types_filter=[SHARE]), max_version=5)
    check(response.error_code, None, "ListGroups")
    return [{"group": g.group_id, "state": g.group_state} for g in sorted(response.groups, key=lambda g: g.group_id)]


def describe(client: WireClient, group: str) -> dict[str, Any]:
    """State, epochs and members (ShareGroupDescribe), and each share-partition's start offset and lag."""
    described = client.call(ShareGroupDescribeRequest(group_ids=[group]), max_version=1).groups[0]
    check(described.error_code, described.error_message, f"ShareGroupDescribe {group}")
    offsets = client.call(DescribeShareGroupOffsetsRequest(groups=[
        DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), max_version=1).groups[0]
    check(offsets.error_code, offsets.error_message, f"DescribeShareGroupOffsets {group}")
    rows = [{"topic": t.topic_name, "partition": p.partition_index, "start_offset": p.start_offset,
             "lag": p.lag if p.lag >= 0 else None, "error": error_name(p.error_code) if p.error_code else None}
            for t in offsets.topics for p in t.partitions]
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                "member_epoch": m.member_epoch, "subscribed": ",".join(m.subscribed_topic_names),
                "partitions": sum(len(t.partitions) for t in m.assignment.topic_partitions),
                "assignment": ",".join(f"{t.topic_name}:{p}" for t in m.assignment.topic_partitions
                                       for p in t.partitions)}
               for m in described.members]
    return {"group": group, "state": described.group_state, "group_epoch": described.group_epoch,
            "assignment_epoch": described.assignment_epoch, "assignor": described.assignor_name,
            "members": members, "offsets": rows,
            "total_lag": sum(r["lag"] or 0 for r in rows)}


def _topic_partitions(client: WireClient, topics: list[str]) -> list[tuple[str, int]]:
    found = {t.name: t for t in metadata(client, topics)}
    out: list[tuple[str, int]] = []
    for name in topics:
        topic = found.get(name)
        if topic is None or topic.error_code:
            raise WireError(f"topic {name}: {error_name(topic.error_code) if topic else 'UNKNOWN_TOPIC_OR_PARTITION'}",
                            "UNKNOWN_TOPIC_OR_PARTITION")
        out += [(name, p.partition_index) for p in topic.partitions]
    return sorted(out)


def plan_reset(client: WireClient, group: str, topics: list[str], target: str, offset: int | None) -> list[dict[str, Any]]:
    """(topic, partition, start offset now, new start offset) for `target` earliest, latest or offset."""
    partitions = _topic_partitions(client, topics)
    now = {(r["topic"], r["partition"]): r["start_offset"] for r in describe_offsets(client, group)}
    starts = list_offsets(client, partitions, EARLIEST)
    ends = list_offsets(client, partitions, LATEST)
    plan = []
    for tp in partitions:
        new = {"earliest": starts[tp], "latest": ends[tp]}.get(target, offset if offset is not None else 0)
        new = min(max(new, starts[tp]), ends[tp])
        plan.append({"group": group, "topic": tp[0], "partition": tp[1], "start_offset": now.get(tp, -1),
                     "new_offset": new})
    return plan


def describe_offsets(client: WireClient, group: str) -> list[dict[str, Any]]:
    answer = client.call(DescribeShareGroupOffsetsRequest(groups=[
        DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), max_version=1).groups[0]
    if answer.error_code:  # a group that does not exist yet has no start offsets
        return []
    return [{"topic": t.topic_name, "partition": p.partition_index, "start_offset": p.start_offset}
            for t in answer.topics for p in t.partitions]


def execute_plan(client: WireClient, group: str, plan: list[dict[str, Any]]) -> None:
    by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
    for row in plan:
        by_topic.setdefault(row["topic"], []).append(AlterShareGroupOffsetsRequestPartition(
            partition_index=row["partition"], start_offset=row["new_offset"]))
    response = client.call(AlterShareGroupOffsetsRequest(group_id=group, topics=[
        AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=parts) for topic, parts in by_topic.items()]),
        max_version=0)
    check(response.error_code, response.error_message, f"AlterShareGroupOffsets {group}")
    for topic in response.responses:
        for part in topic.partitions:
            check(part.error_code, part.error_message, f"AlterShareGroupOffsets {group} {topic.topic_name}-"
                  f"{part.partition_index}")


def delete_offsets(client: WireClient, group: str, topics: list[str]) -> list[dict[str, Any]]:
    response = client.call(DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]), max_version=0)
    check(response.error_code, response.error_message, f"DeleteShareGroupOffsets {group}")
    return [{"group": group, "topic": t.topic_name, "deleted": not t.error_code,
             "error": error_name(t.error_code) if t.error_code else None} for t in response.responses]


def delete_groups(client: WireClient, groups: list[str]) -> list[dict[str, Any]]:
    response = client.call(DeleteGroupsRequest(groups_names=groups), max_version=2)
    return [{"group": r.group_id, "deleted": not r.error_code, "error": error_name(r.error_code) if r.error_code
             else None} for r in response.results]
