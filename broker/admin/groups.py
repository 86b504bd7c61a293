"""What `pybroker groups ...` asks the broker: ListGroups, DescribeGroups, OffsetFetch, ListOffsets and
OffsetCommit, as plain rows — the same figures kafka-consumer-groups shows (committed offset, log end
offset, lag, and the member that owns each partition)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pybroker.broker.admin.assignment import decode_assignment
from pybroker.broker.admin.topics import EARLIEST, LATEST, check, list_offsets, metadata
from pybroker.broker.admin.wire import WireClient, WireError
from pybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from pybroker.protocol.messages.list_groups import ListGroupsRequest
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pybroker.protocol.messages.offset_fetch import OffsetFetchRequest

#: groups whose offsets may be reset: nobody is consuming
INACTIVE_STATES = ("Empty", "Dead")


def list_groups(client: WireClient) -> list[dict[str, Any]]:
    response = client.call(ListGroupsRequest(), max_version=4)
    check(response.error_code, None, "ListGroups")
    return [{"group": g.group_id, "state": g.group_state or None, "protocol_type": g.protocol_type or None}
            for g in sorted(response.groups, key=lambda g: g.group_id)]


def committed_offsets(client: WireClient, group: str) -> dict[tuple[str, int], int]:
    response = client.call(OffsetFetchRequest(group_id=group, topics=None), max_version=7)
    check(response.error_code, None, f"OffsetFetch {group}")
    offsets: dict[tuple[str, int], int] = {}
    for topic in response.topics:
        for part in topic.partitions:
            check(part.error_code, None, f"OffsetFetch {group} {topic.name}-{part.partition_index}")
            if part.committed_offset >= 0:
                offsets[(topic.name, part.partition_index)] = part.committed_offset
    return offsets


def describe_group(client: WireClient, group: str) -> dict[str, Any]:
    response = client.call(DescribeGroupsRequest(groups=[group]), max_version=5)
    described = response.groups[0]
    check(described.error_code, described.error_message, f"DescribeGroups {group}")
    owners: dict[tuple[str, int], dict[str, Any]] = {}
    members = []
    for member in described.members:
        assigned = decode_assignment(bytes(member.member_assignment))
        row = {"member_id": member.member_id, "client_id": member.client_id, "host": member.client_host,
               "assignment": None if assigned is None else [f"{t}-{p}" for t, p in assigned]}
        members.append(row)
        for key in assigned or []:
            owners[key] = row
    committed = committed_offsets(client, group)
    keys = sorted(set(committed) | set(owners))
    ends = list_offsets(client, keys, LATEST)
    offsets = []
    for key in keys:
        current, end = committed.get(key), ends.get(key)
        owner = owners.get(key, {})
        offsets.append({"topic": key[0], "partition": key[1], "current_offset": current, "log_end_offset": end,
                        "lag": None if current is None or end is None or end < 0 else max(0, end - current),
                        "member_id": owner.get("member_id"), "client_id": owner.get("client_id"),
                        "host": owner.get("host")})
    return {"group": group, "state": described.group_state, "protocol_type": described.protocol_type or None,
            "protocol": described.protocol_data or None, "members": members, "offsets": offsets}


def _target_partitions(client: WireClient, topics: Iterable[str], committed: dict[tuple[str, int], int]
                       ) -> list[tuple[str, int]]:
    names = list(topics)
    if not names:
        if not committed:
            raise WireError("the group has no committed offsets; name the topics with --topic")
        return sorted(committed)
    keys: list[tuple[str, int]] = []
    for topic in metadata(client, names):
        check(topic.error_code, None, f"topic {topic.name}")
        keys += [(topic.name, p.partition_index) for p in topic.partitions]
    return sorted(keys)


def plan_reset(client: WireClient, group: str, topics: Iterable[str], *, to: str, offset: int | None = None,
               timestamp_ms: int | None = None) -> list[dict[str, Any]]:
    """The new offset of each partition; `to` is earliest, latest, offset or datetime."""
    state = describe_group(client, group)["state"]
    if state not in INACTIVE_STATES:
        raise WireError(f"group {group} is {state}: offsets can only be reset while it has no members "
                        "(stop its consumers first)")
    committed = committed_offsets(client, group)
    keys = _target_partitions(client, topics, committed)
    starts = list_offsets(client, keys, EARLIEST)
    ends = list_offsets(client, keys, LATEST)
    if to == "datetime":
        assert timestamp_ms is not None
        found = list_offsets(client, keys, timestamp_ms)
    plan = []
    for key in keys:
        start, end = starts[key], ends[key]
        if to == "earliest":
            new = start
        elif to == "latest":
            new = end
        elif to == "offset":
            assert offset is not None
            new = min(max(offset, start), end)  # as kafka-consumer-groups: clamp into the log
        else:
            new = found[key] if found[key] >= 0 else end  # nothing at or after that time: the end
        plan.append({"topic": key[0], "partition": key[1], "current_offset": committed.get(key),
                     "new_offset": new})
    return plan


def commit_plan(client: WireClient, group: str, plan: list[dict[str, Any]]) -> None:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for row in plan:
        by_topic.setdefault(row["topic"], []).append(OffsetCommitRequestPartition(
            partition_index=row["partition"], committed_offset=row["new_offset"], committed_metadata=""))
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  retention_time_ms=-1,
                                  topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()])
    response = client.call(request, max_version=7)
    for topic in response.topics:
        for part in topic.partitions:
            check(part.error_code, None, f"OffsetCommit {group} {topic.name}-{part.partition_index}")
