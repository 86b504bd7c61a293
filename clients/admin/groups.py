"""What `pybroker groups ...` asks the broker: ListGroups, ConsumerGroupDescribe (KIP-848 groups),
StreamsGroupDescribe (KIP-1071 streams groups), DescribeGroups (classic ones), OffsetFetch, ListOffsets,
OffsetCommit, DeleteGroups and OffsetDelete, as plain rows — the same figures kafka-consumer-groups shows
(committed offset, log end offset, lag, and the member that owns each partition).

Offset resets are planned first (`plan_reset`, one row per partition with its current and new offset)
and committed only on request (`commit_plan`), as kafka-consumer-groups' dry run and `--execute`. Every
way to choose the new offset lands in the log: a target before the log start or past its end is moved to
the nearest end, as Kafka's tool does.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pybroker.clients.admin.topics import EARLIEST, LATEST, check, error_name, list_offsets, metadata
from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.member_assignment import decode_assignment
from pybroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from pybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from pybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from pybroker.protocol.messages.list_groups import ListGroupsRequest
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pybroker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from pybroker.protocol.messages.offset_fetch import OffsetFetchRequest
from pybroker.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest

#: groups whose offsets may be reset: nobody is consuming
INACTIVE_STATES = ("Empty", "Dead")
#: the StreamsGroupDescribe version asked at most (v1 names the assignor)
STREAMS_DESCRIBE_VERSION = 1
Partition = tuple[str, int]


def list_groups(client: WireClient) -> list[dict[str, Any]]:
    response = client.call(ListGroupsRequest(), max_version=5)
    check(response.error_code, None, "ListGroups")
    return [{"group": g.group_id, "state": g.group_state or None, "protocol_type": g.protocol_type or None,
             "group_type": g.group_type.lower() or None}  # v5 (KIP-848): Classic or Consumer
            for g in sorted(response.groups, key=lambda g: g.group_id)]


def committed_offsets(client: WireClient, group: str) -> dict[Partition, int]:
    response = client.call(OffsetFetchRequest(group_id=group, topics=None), max_version=7)
    check(response.error_code, None, f"OffsetFetch {group}")
    offsets: dict[Partition, int] = {}
    for topic in response.topics:
        for part in topic.partitions:
            check(part.error_code, None, f"OffsetFetch {group} {topic.name}-{part.partition_index}")
            if part.committed_offset >= 0:
                offsets[(topic.name, part.partition_index)] = part.committed_offset
    return offsets


@dataclass
class GroupView:
    """One group as its coordinator holds it, whichever protocol it speaks: `group_type` "consumer" for
    a KIP-848 group (ConsumerGroupDescribe: epochs, each member's assignment), "streams" for a KIP-1071
    group (StreamsGroupDescribe: epochs, each member's process and tasks), "classic" otherwise
    (DescribeGroups: the assignment the leader handed out). Members are rows with the same keys whatever the
    protocol (a streams member is assigned tasks, not partitions: its `partitions` and `assignment` are None,
    its tasks are under `active_tasks`, `standby_tasks` and `warmup_tasks`)."""

    state: str
    group_type: str
    protocol_type: str | None
    protocol: str | None
    members: list[dict[str, Any]]
    epochs: dict[str, int] = field(default_factory=dict)


def _consumer_group(client: WireClient, group: str) -> Any | None:
    """ConsumerGroupDescribe's answer for a KIP-848 group; None for a classic or unknown group (the API
    answers GROUP_ID_NOT_FOUND for both) or a broker without the API. Asked first, as Kafka's admin
    client does, since DescribeGroups answers "Dead" for a consumer-protocol group."""
    if not client.serves(ApiKey.CONSUMER_GROUP_DESCRIBE):
        return None
    described = client.call(ConsumerGroupDescribeRequest(group_ids=[group]), max_version=1).groups[0]
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check(described.error_code, described.error_message, f"ConsumerGroupDescribe {group}")
    return described


def _streams_group(client: WireClient, group: str) -> Any | None:
    """StreamsGroupDescribe's answer for a streams group; None for another or unknown group (GROUP_ID_NOT_FOUND
    for both, as in Kafka) or a broker without the API."""
    if not client.serves(ApiKey.STREAMS_GROUP_DESCRIBE):
        return None
    request = StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
    described = client.call(request, max_version=STREAMS_DESCRIBE_VERSION).groups[0]
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check(described.error_code, described.error_message, f"StreamsGroupDescribe {group}")
    return described


def task_names(task_ids: Iterable[Any]) -> list[str]:
    """Tasks as Kafka Streams names them: `<subtopology>_<partition>` (TaskId's form), sorted."""
    return sorted((f"{t.subtopology_id}_{p}" for t in task_ids for p in t.partitions),
                  key=lambda name: (name.rpartition("_")[0], int(name.rpartition("_")[2])))


def _streams_member(member: Any) -> dict[str, Any]:
    endpoint = member.user_endpoint
    row: dict[str, Any] = {
        "member_id": member.member_id, "group_instance_id": member.instance_id, "client_id": member.client_id,
        "host": member.client_host, "partitions": None, "assignment": None, "member_epoch": member.member_epoch,
        "process_id": member.process_id, "topology_epoch": member.topology_epoch,
        "user_endpoint": None if endpoint is None else f"{endpoint.host}:{endpoint.port}",
        "client_tags": {tag.key: tag.value for tag in member.client_tags}}
    for kind in ("active", "standby", "warmup"):
        row[f"{kind}_tasks"] = task_names(getattr(member.assignment, f"{kind}_tasks"))
        row[f"target_{kind}_tasks"] = task_names(getattr(member.target_assignment, f"{kind}_tasks"))
    return row


def _streams_view(described: Any) -> GroupView:
    members = [_streams_member(m) for m in sorted(described.members, key=lambda m: m.member_id)]
    epochs = {"group_epoch": described.group_epoch, "assignment_epoch": described.assignment_epoch,
              "topology_epoch": None if described.topology is None else described.topology.epoch}
    return GroupView(described.group_state, "streams", "streams", described.assignor_name or None,  # None below v1
                     members, epochs)


def _partitions(assignment: Any) -> list[Partition]:
    return sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


def group_state(client: WireClient, group: str) -> GroupView:
    """The group's state and members (an unknown group: state Dead, no members)."""
    consumer = _consumer_group(client, group)
    if consumer is not None:
        members = []
        for member in sorted(consumer.members, key=lambda m: m.member_id):
            assigned, target = _partitions(member.assignment), _partitions(member.target_assignment)
            members.append({"member_id": member.member_id, "group_instance_id": member.instance_id,
                            "client_id": member.client_id, "host": member.client_host,
                            "partitions": len(assigned), "assignment": [f"{t}-{p}" for t, p in assigned],
                            "member_epoch": member.member_epoch,
                            "target_assignment": [f"{t}-{p}" for t, p in target],
                            "subscribed_topics": sorted(member.subscribed_topic_names)})
        return GroupView(consumer.group_state, "consumer", "consumer", consumer.assignor_name or None, members,
                         {"group_epoch": consumer.group_epoch, "assignment_epoch": consumer.assignment_epoch})
    streams = _streams_group(client, group)
    if streams is not None:
        return _streams_view(streams)
    described = client.call(DescribeGroupsRequest(groups=[group]), max_version=5).groups[0]
    check(described.error_code, described.error_message, f"DescribeGroups {group}")
    members = []
    for member in described.members:
        decoded = decode_assignment(bytes(member.member_assignment))
        members.append({"member_id": member.member_id, "group_instance_id": member.group_instance_id,
                        "client_id": member.client_id, "host": member.client_host,
                        "partitions": None if decoded is None else len(decoded),
                        "assignment": None if decoded is None else [f"{t}-{p}" for t, p in decoded]})
    return GroupView(described.group_state, "classic", described.protocol_type or None,
                     described.protocol_data or None, members)


def describe_group(client: WireClient, group: str) -> dict[str, Any]:
    """State, members (with what each is assigned) and per-partition offsets and lag.

    A group the coordinator does not know and that has no committed offsets does not exist: a
    `WireError` with GROUP_ID_NOT_FOUND, as kafka-consumer-groups reports it (never a "Dead" group)."""
    described = group_state(client, group)
    committed = committed_offsets(client, group)
    if described.state == "Dead" and not described.members and not committed:
        raise WireError(f"consumer group {group!r} does not exist", "GROUP_ID_NOT_FOUND")
    owners: dict[Partition, dict[str, Any]] = {}
    members = described.members
    for row in members:
        for name in row["assignment"] or []:
            topic, _, partition = name.rpartition("-")
            owners[(topic, int(partition))] = row
    keys = sorted(set(committed) | set(owners))
    ends = list_offsets(client, keys, LATEST)
    offsets = []
    for key in keys:
        current, end = committed.get(key), ends.get(key)
        owner = owners.get(key, {})
        offsets.append({"group": group, "topic": key[0], "partition": key[1], "current_offset": current,
                        "log_end_offset": end,
                        "lag": None if current is None or end is None or end < 0 else max(0, end - current),
                        "member_id": owner.get("member_id"), "client_id": owner.get("client_id"),
                        "host": owner.get("host")})
    return {"group": group, "state": described.state, "group_type": described.group_type,
            "protocol_type": described.protocol_type, "protocol": described.protocol, **described.epochs,
            "members": members, "offsets": offsets, "total_lag": sum(row["lag"] or 0 for row in offsets)}


def state_row(described: Mapping[str, Any], coordinator: str) -> dict[str, Any]:
    """`--state`: one line per group, as kafka-consumer-groups --describe --state."""
    return {"group": described["group"], "coordinator": coordinator, "state": described["state"],
            "assignment_strategy": described["protocol"], "members": len(described["members"]),
            "total_lag": described["total_lag"]}


def delete_groups(client: WireClient, groups: Sequence[str]) -> list[dict[str, Any]]:
    """DeleteGroups; every group's own answer (GROUP_NOT_EMPTY, GROUP_ID_NOT_FOUND or deleted)."""
    response = client.call(DeleteGroupsRequest(groups_names=list(groups)), max_version=2)
    return [{"group": r.group_id, "deleted": r.error_code == ErrorCode.NONE,
             "error": None if r.error_code == ErrorCode.NONE else error_name(r.error_code)}
            for r in response.results]


def delete_offsets(client: WireClient, group: str, partitions: Sequence[Partition]) -> list[dict[str, Any]]:
    """OffsetDelete: forget the group's committed offsets of these partitions (it must not consume them)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    request = OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequestTopic(name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in sorted(by_topic.items())])
    response = client.call(request, max_version=0)
    check(response.error_code, None, f"OffsetDelete {group}")
    return [{"group": group, "topic": t.name, "partition": p.partition_index,
             "deleted": p.error_code == ErrorCode.NONE,
             "error": None if p.error_code == ErrorCode.NONE else error_name(p.error_code)}
            for t in response.topics for p in t.partitions]


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """`topic` or `topic:0,2` (Kafka's `--topic` form for chosen partitions)."""
    topic, colon, parts = spec.rpartition(":")
    if not colon or not parts or not all(p.strip().isdigit() for p in parts.split(",")):
        return spec, None
    return topic, sorted({int(p) for p in parts.split(",")})


def resolve_partitions(client: WireClient, specs: Iterable[str]) -> list[Partition]:
    """Every partition the `--topic` specs name (all of a topic's when none are given)."""
    wanted = [parse_topic_spec(spec) for spec in specs]
    if not wanted:
        return []
    found = {t.name: t for t in metadata(client, sorted({name for name, _ in wanted}))}
    keys: set[Partition] = set()
    for name, parts in wanted:
        topic = found[name]
        check(topic.error_code, None, f"topic {name}")
        existing = {p.partition_index for p in topic.partitions}
        for part in parts if parts is not None else existing:
            if part not in existing:
                raise WireError(f"topic {name} has no partition {part}", "UNKNOWN_TOPIC_OR_PARTITION")
            keys.add((name, part))
    return sorted(keys)


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """How `plan_reset` picks the new offset: `to` is one of earliest, latest, current, offset, shift,
    timestamp or file (then `offsets` holds the file's offsets for this group)."""

    to: str
    offset: int | None = None
    shift: int = 0
    timestamp_ms: int | None = None
    offsets: Mapping[Partition, int] = field(default_factory=dict)


def parse_offsets_file(text: str) -> dict[str, dict[Partition, int]]:
    """Kafka's reset CSV: `topic,partition,offset` lines, or `group,topic,partition,offset` (group "" =
    every group). Raises ValueError naming the bad line."""
    out: dict[str, dict[Partition, int]] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        cells = [cell.strip() for cell in row]
        if not cells or not any(cells) or cells[0].startswith("#"):
            continue
        if len(cells) not in (3, 4) or not cells[-1].lstrip("-").isdigit() or not cells[-2].isdigit():
            raise ValueError(f"line {number}: expected topic,partition,offset (or group,topic,partition,offset), "
                             f"got {','.join(row)!r}")
        group = cells[0] if len(cells) == 4 else ""
        out.setdefault(group, {})[(cells[-3], int(cells[-2]))] = int(cells[-1])
    return out


def plan_reset(client: WireClient, group: str, partitions: Sequence[Partition], target: ResetTarget,
               *, all_topics: bool = False) -> list[dict[str, Any]]:
    """The new offset of each partition (those named, else every one the group has committed)."""
    state = group_state(client, group).state
    if state not in INACTIVE_STATES:
        raise WireError(f"group {group} is {state}: offsets can only be reset while it has no members "
                        "(stop its consumers first)")
    committed = committed_offsets(client, group)
    keys = sorted(target.offsets) if target.to == "file" and not partitions else list(partitions)
    if not keys or all_topics:
        keys = sorted(set(keys) | set(committed))
    if not keys:
        raise WireError(f"group {group} has no committed offsets; name the topics with --topic")
    starts = list_offsets(client, keys, EARLIEST)
    ends = list_offsets(client, keys, LATEST)
    found: dict[Partition, int] = {}
    if target.to == "timestamp":
        assert target.timestamp_ms is not None  # a "timestamp" target always carries its time
        found = list_offsets(client, keys, target.timestamp_ms)
    plan = []
    for key in keys:
        start, end, current = starts[key], ends[key], committed.get(key)
        if target.to == "earliest":
            wanted = start
        elif target.to == "latest":
            wanted = end
        elif target.to == "current":
            wanted = end if current is None else current
        elif target.to == "offset":
            assert target.offset is not None
            wanted = target.offset
        elif target.to == "shift":
            if current is None:
                raise WireError(f"group {group} has no committed offset for {key[0]}-{key[1]} to shift")
            wanted = current + target.shift
        elif target.to == "timestamp":
            wanted = found[key] if found[key] >= 0 else end  # nothing at or after that time: the end
        else:
            if key not in target.offsets:
                continue
            wanted = target.offsets[key]
        plan.append({"group": group, "topic": key[0], "partition": key[1], "current_offset": current,
                     "new_offset": min(max(wanted, start), end)})
    return plan


def export_plan(plan: Sequence[Mapping[str, Any]], with_group: bool) -> str:
    """The plan as Kafka's reset CSV (what `--from-file` reads back)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in plan:
        cells = [row["topic"], row["partition"], row["new_offset"]]
        writer.writerow([row["group"], *cells] if with_group else cells)
    return out.getvalue()


def commit_plan(client: WireClient, group: str, plan: Sequence[Mapping[str, Any]]) -> None:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for row in plan:
        by_topic.setdefault(row["topic"], []).append(OffsetCommitRequestPartition(
            partition_index=row["partition"], committed_offset=row["new_offset"], committed_metadata=""))
    if not by_topic:
        return
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  retention_time_ms=-1,
                                  topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()])
    response = client.call(request, max_version=7)
    for topic in response.topics:
        for part in topic.partitions:
            check(part.error_code, None, f"OffsetCommit {group} {topic.name}-{part.partition_index}")
