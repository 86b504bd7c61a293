"""Share groups (KIP-932) for the console's group pages: ShareGroupDescribe and DescribeShareGroupOffsets as
JSON-ready rows, with each share-partition's records in flight counted by state.

Called on the event loop by `reads` (the group list and a group's page), with the console user's own
LocalClient, so the APIs authorize what is shown: DESCRIBE on the GROUP for both (a group the user may not
see is left out of the list, or a 403 on its page), and DESCRIBE on each TOPIC for a partition's start
offset, lag and counts (a denied topic's rows carry the error and no figures).

A share group has no committed offsets: each share-partition (the group's view of one topic partition) has a
start offset below which every record is done, and records in flight past it, each available, acquired (by
one member, under a lock), acknowledged or archived. Kafka has no API for those counts; the console reads
them from the broker's share-partitions (`ShareService.partitions`), and only for a partition
DescribeShareGroupOffsets answered without an error, so they are shown exactly where the start offset is.
The lag is Kafka's (DescribeShareGroupOffsets v1): the records from the start offset to the high watermark
not yet acknowledged or archived.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.share.share_partition import RecordState
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from pybroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest

DESCRIBE_VERSION = 1
OFFSETS_VERSION = 1  # v1 answers the lag
#: the columns of a share-partition's in-flight counts, in the order the page shows them
STATE_COLUMNS = {RecordState.AVAILABLE: "available", RecordState.ACQUIRED: "acquired",
                 RecordState.ACKNOWLEDGED: "acknowledged", RecordState.ARCHIVED: "archived"}


def _partitions(assignment: Any) -> list[str]:
    return sorted(f"{t.topic_name}-{p}" for t in assignment.topic_partitions for p in t.partitions)


def member(m: Any) -> dict[str, Any]:
    return {"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "subscribed_topics": sorted(m.subscribed_topic_names),
            "assignment": _partitions(m.assignment)}


def head(g: Any) -> dict[str, Any]:
    return {"group": g.group_id, "state": g.group_state, "group_type": "share", "protocol_type": "share",
            "protocol": g.assignor_name, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch}


async def describe(client: LocalClient, ids: list[str]) -> dict[str, Any]:
    """ShareGroupDescribe's answers by group id, for the share groups among `ids` (another type's group,
    or an unknown one, answers GROUP_ID_NOT_FOUND: left out)."""
    if not ids:
        return {}
    response = await client.call(ShareGroupDescribeRequest(group_ids=ids, include_authorized_operations=False),
                                 DESCRIBE_VERSION)
    return {g.group_id: g for g in response.groups if g.error_code != ErrorCode.GROUP_ID_NOT_FOUND}


def _error_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"ERROR_{code}"


def _counts(client: LocalClient, group_id: str, topic_id: Any, partition: int) -> dict[str, int]:
    counts = dict.fromkeys(STATE_COLUMNS.values(), 0)
    share = client.state.shares.partitions.get((group_id, topic_id, partition))
    if share is not None:
        for record in share.records.values():
            counts[STATE_COLUMNS[record.state]] += 1
    return counts


async def share_partitions(client: LocalClient, group_id: str) -> tuple[int, list[dict[str, Any]]]:
    """(the group's error code, its share-partitions: start offset, lag and in-flight counts by state)."""
    response = await client.call(DescribeShareGroupOffsetsRequest(groups=[DescribeShareGroupOffsetsRequestGroup(
        group_id=group_id, topics=None)]), OFFSETS_VERSION)
    answer = response.groups[0]
    if answer.error_code:
        return answer.error_code, []
    rows = []
    for topic in answer.topics:
        for p in topic.partitions:
            row: dict[str, Any] = {"topic": topic.topic_name, "partition": p.partition_index,
                                   "error": None if not p.error_code else _error_name(p.error_code)}
            if p.error_code:
                rows.append(row)
                continue
            row.update(start_offset=p.start_offset, lag=None if p.lag < 0 else p.lag,
                       **_counts(client, group_id, topic.topic_id, p.partition_index))
            rows.append(row)
    return ErrorCode.NONE, sorted(rows, key=lambda r: (r["topic"], r["partition"]))
