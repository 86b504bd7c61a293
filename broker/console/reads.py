"""What the console's pages show, as plain JSON-ready dicts, each read through a Kafka API.

Every figure here is one a Kafka client could get: Metadata for topics and partitions, ListOffsets for
offsets, DescribeLogDirs for sizes and free space, DescribeConfigs for configs with their sources,
ListGroups / ConsumerGroupDescribe (KIP-848 groups) / StreamsGroupDescribe (KIP-1071 streams groups, see
`streams_groups`) / ShareGroupDescribe and DescribeShareGroupOffsets (KIP-932 share groups, see `share_groups`;
their in-flight counts are the one figure no Kafka API answers) / DescribeGroups (classic ones) / OffsetFetch for groups and lag (Kafka's LAG: log end offset
minus committed offset). So a user sees exactly what the ACLs let them see. Only the broker's identity and listeners come
from the broker's state, as the metrics' `pybroker_info` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pybroker.broker.console import share_groups, streams_groups
from pybroker.broker.console.humanize import config_display
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.params import ConsoleError
from pybroker.config.broker_config import ConfigSource
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.member_assignment import decode_assignment
from pybroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from pybroker.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from pybroker.protocol.messages.list_groups import ListGroupsRequest
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.offset_fetch import OffsetFetchRequest

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

EARLIEST, LATEST = -2, -1
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
#: groups the group list describes (one DescribeGroups and one OffsetFetch each)
MAX_GROUPS_LISTED = 500
SOURCE_NAMES = {int(s): s.name for s in ConfigSource}
#: sources that are not an override of this resource (the page marks every other one)
NOT_OVERRIDES = frozenset({int(ConfigSource.DEFAULT_CONFIG), int(ConfigSource.UNKNOWN)})
OFFSET_FETCH_VERSION = 7  # one group per request, topics=None for all of them
DESCRIBE_GROUPS_VERSION = 5
CONSUMER_GROUP_DESCRIBE_VERSION = 1
METADATA_VERSION = 12


def error_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"ERROR_{code}"


def refused(code: int, what: str, message: str | None = None) -> ConsoleError:
    """A Kafka error as an HTTP answer: 403 for an authorization failure, 404 for an unknown name, else 409."""
    name = error_name(code)
    status = 403 if name.endswith("AUTHORIZATION_FAILED") else 404 if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND) else 409
    return ConsoleError(status, f"{what}: {name}" + (f" ({message})" if message else ""))


async def metadata(client: LocalClient, names: list[str] | None) -> list[Any]:
    topics = None if names is None else [MetadataRequestTopic(name=n) for n in names]
    response = await client.call(MetadataRequest(topics=topics, allow_auto_topic_creation=False), METADATA_VERSION)
    return sorted(response.topics, key=lambda t: t.name or "")


async def list_offsets(client: LocalClient, keys: Iterable[tuple[str, int]], timestamp: int
                       ) -> dict[tuple[str, int], int]:
    """The offset for `timestamp` (EARLIEST, LATEST or ms) of each partition; -1 where there is none."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in keys:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return {}
    request = ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsTopic(name=t, partitions=[ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                                             for p in sorted(ps)]) for t, ps in sorted(by_topic.items())])
    response = await client.call(request)
    return {(t.name, p.partition_index): (p.offset if p.error_code == 0 else -1)
            for t in response.topics for p in t.partitions}


async def log_dirs(client: LocalClient) -> list[Any]:
    response = await client.call(DescribeLogDirsRequest(topics=None))
    if response.error_code:
        raise refused(response.error_code, "DescribeLogDirs")
    return list(response.results)


async def _sizes(client: LocalClient) -> dict[tuple[str, int], tuple[str, int]] | None:
    """(topic, partition) -> (log dir, bytes); None for a user who may not DESCRIBE the cluster (DescribeLogDirs
    needs it), who then sees topics without sizes."""
    try:
        dirs = await log_dirs(client)
    except ConsoleError as exc:
        if exc.status == 403:
            return None
        raise
    return {(t.name, p.partition_index): (d.log_dir, p.partition_size)
            for d in dirs for t in d.topics for p in t.partitions if not p.is_future_key}


# -- overview ----------------------------------------------------------------------------------
async def overview(state: BrokerState, client: LocalClient) -> dict[str, Any]:
    dirs = await log_dirs(client)
    topics = await metadata(client, None)
    groups = await client.call(ListGroupsRequest())
    by_state: dict[str, int] = {}
    for group in groups.groups:
        by_state[group.group_state or "Unknown"] = by_state.get(group.group_state or "Unknown", 0) + 1
    listeners = []
    for spec in state.config.listener_specs():
        host, port = state.address_of(spec.name)
        listeners.append({"name": spec.name, "security_protocol": spec.security_protocol,
                          "bind": f"{spec.host or '0.0.0.0'}:{spec.port}", "advertised": f"{host}:{port}"})
    return {
        "broker": {"node_id": state.node_id, "cluster_id": state.cluster_id},
        "listeners": listeners,
        "log_dirs": [{"path": d.log_dir, "online": d.error_code == 0, "error": error_name(d.error_code) if d.error_code
                      else None, "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes,
                      "partitions": sum(not p.is_future_key for t in d.topics for p in t.partitions),
                      "size_bytes": sum(p.partition_size for t in d.topics for p in t.partitions if not p.is_future_key),
                      # partitions being moved into this dir (AlterReplicaLogDirs): their copies' bytes are in
                      # `size_bytes` of no dir until they land
                      "moving_in": sum(p.is_future_key for t in d.topics for p in t.partitions)} for d in dirs],
        "topics": sum(1 for t in topics if not t.is_internal),
        "partitions": sum(len(t.partitions) for t in topics),
        "groups": by_state,
        "connections": len(state.connections),
    }


# -- topics ------------------------------------------------------------------------------------
async def topics(client: LocalClient, include_internal: bool) -> list[dict[str, Any]]:
    listed = [t for t in await metadata(client, None) if t.error_code == 0 and (include_internal or not t.is_internal)]
    keys = [(t.name, p.partition_index) for t in listed for p in t.partitions]
    starts = await list_offsets(client, keys, EARLIEST)
    ends = await list_offsets(client, keys, LATEST)
    sizes = await _sizes(client)
    rows = []
    for t in listed:
        parts = [(t.name, p.partition_index) for p in t.partitions]
        by_dir: dict[str, int] = {}
        for key in parts:
            directory, size = (sizes or {}).get(key, ("", 0))
            if directory:
                by_dir[directory] = by_dir.get(directory, 0) + size
        rows.append({"name": t.name, "internal": t.is_internal, "partitions": len(parts),
                     "messages": sum(max(0, ends.get(k, 0) - starts.get(k, 0)) for k in parts),
                     "size_bytes": None if sizes is None else sum(by_dir.values()), "size_by_dir": by_dir})
    return rows


async def topic(client: LocalClient, name: str) -> dict[str, Any]:
    found = await metadata(client, [name])
    if not found or found[0].error_code:
        raise refused(found[0].error_code if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name}")
    t = found[0]
    keys = [(name, p.partition_index) for p in sorted(t.partitions, key=lambda p: p.partition_index)]
    starts = await list_offsets(client, keys, EARLIEST)
    ends = await list_offsets(client, keys, LATEST)
    sizes = await _sizes(client)
    partitions = []
    for key in keys:
        start, end = starts.get(key, -1), ends.get(key, -1)
        directory, size = (sizes or {}).get(key, ("", 0))
        partitions.append({"partition": key[1], "start_offset": start, "end_offset": end,
                           "messages": max(0, end - start), "size_bytes": None if sizes is None else size,
                           "log_dir": directory or None})
    return {"name": name, "topic_id": str(t.topic_id), "internal": t.is_internal, "partitions": partitions,
            "configs": await configs(client, TOPIC_RESOURCE, name)}


async def configs(client: LocalClient, resource_type: int, name: str) -> list[dict[str, Any]]:
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=resource_type,
                                                                        resource_name=name, configuration_keys=None)],
                                     include_synonyms=False, include_documentation=True)
    response = await client.call(request)
    result = response.results[0]
    if result.error_code:
        raise refused(result.error_code, f"configs of {name}", result.error_message)
    return [{"name": c.name, "value": c.value, "display": config_display(c.name, c.value, c.config_type),
             "source": SOURCE_NAMES.get(c.config_source, str(c.config_source)),
             "override": c.config_source not in NOT_OVERRIDES, "read_only": c.read_only,
             "sensitive": c.is_sensitive, "documentation": c.documentation or ""}
            for c in sorted(result.configs, key=lambda c: c.name)]


# -- consumer groups ---------------------------------------------------------------------------
async def committed(client: LocalClient, group: str) -> dict[tuple[str, int], int]:
    response = await client.call(OffsetFetchRequest(group_id=group, topics=None), OFFSET_FETCH_VERSION)
    if response.error_code:
        raise refused(response.error_code, f"offsets of group {group}")
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions
            if p.error_code == 0 and p.committed_offset >= 0}


async def consumer_groups(client: LocalClient, ids: list[str]) -> dict[str, Any]:
    """ConsumerGroupDescribe's answers by group id, for the KIP-848 groups among `ids` (DescribeGroups
    calls such a group Dead; this API answers GROUP_ID_NOT_FOUND for a classic one, left out here)."""
    if not ids:
        return {}
    response = await client.call(ConsumerGroupDescribeRequest(group_ids=ids), CONSUMER_GROUP_DESCRIBE_VERSION)
    return {g.group_id: g for g in response.groups if g.error_code != ErrorCode.GROUP_ID_NOT_FOUND}


async def groups(client: LocalClient) -> list[dict[str, Any]]:
    listed = sorted((await client.call(ListGroupsRequest())).groups, key=lambda g: g.group_id)[:MAX_GROUPS_LISTED]
    if not listed:
        return []
    consumer = await consumer_groups(client, [g.group_id for g in listed if g.group_type.lower() == "consumer"])
    streams = await streams_groups.describe(client, [g.group_id for g in listed if g.group_type.lower() == "streams"])
    share = await share_groups.describe(client, [g.group_id for g in listed if g.group_type.lower() == "share"])
    classic = [g.group_id for g in listed if g.group_id not in consumer and g.group_id not in streams
               and g.group_id not in share]
    described = {g.group_id: g for g in (await client.call(DescribeGroupsRequest(groups=classic),
                                                          DESCRIBE_GROUPS_VERSION)).groups} if classic else {}
    rows = []
    for entry in listed:
        if entry.group_id in consumer:
            kip848 = consumer[entry.group_id]
            error, state, protocol_type, members = kip848.error_code, kip848.group_state, "consumer", kip848.members
        elif entry.group_id in streams:
            kip1071 = streams[entry.group_id]
            error, state, protocol_type, members = kip1071.error_code, kip1071.group_state, "streams", \
                kip1071.members
        elif entry.group_id in share:
            kip932 = share[entry.group_id]
            error, state, protocol_type, members = kip932.error_code, kip932.group_state, "share", kip932.members
        else:
            group = described[entry.group_id]
            error, state, protocol_type, members = group.error_code, group.group_state, group.protocol_type, \
                group.members
        if entry.group_id in share:  # no committed offsets: the share-partitions' lag
            shared = (await share_groups.share_partitions(client, entry.group_id))[1] if error == 0 else []
            partitions, lags = len(shared), [r["lag"] or 0 for r in shared if r["error"] is None]
        else:
            offsets = await committed(client, entry.group_id) if error == 0 else {}
            ends = await list_offsets(client, offsets, LATEST)
            partitions, lags = len(offsets), [max(0, ends[k] - c) for k, c in offsets.items() if ends.get(k, -1) >= 0]
        rows.append({"group": entry.group_id, "state": state, "protocol_type": protocol_type,
                     "group_type": "consumer" if entry.group_id in consumer else
                     "streams" if entry.group_id in streams else "share" if entry.group_id in share else "classic",
                     "members": len(members), "partitions": partitions, "lag": sum(lags),
                     "error": error_name(error) if error else None})
    return rows


def _consumer_members(described: Any) -> list[dict[str, Any]]:
    def names(assignment: Any) -> list[str]:
        return [f"{t.topic_name}-{p}" for t in assignment.topic_partitions for p in sorted(t.partitions)]
    return [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
             "assignment": names(m.assignment), "member_epoch": m.member_epoch,
             "target_assignment": names(m.target_assignment)}
            for m in sorted(described.members, key=lambda m: m.member_id)]


async def group(client: LocalClient, group_id: str) -> dict[str, Any]:
    kip848 = (await consumer_groups(client, [group_id])).get(group_id)
    if kip848 is not None:
        if kip848.error_code:
            raise refused(kip848.error_code, f"group {group_id}", kip848.error_message)
        head = {"group": group_id, "state": kip848.group_state, "group_type": "consumer", "protocol_type": "consumer",
                "protocol": kip848.assignor_name, "group_epoch": kip848.group_epoch,
                "assignment_epoch": kip848.assignment_epoch}
        members = _consumer_members(kip848)
    elif (kip1071 := (await streams_groups.describe(client, [group_id])).get(group_id)) is not None:
        if kip1071.error_code:
            raise refused(kip1071.error_code, f"group {group_id}", kip1071.error_message)
        head = streams_groups.head(kip1071)
        members = sorted((streams_groups.member(m) for m in kip1071.members), key=lambda m: m["member_id"])
    elif (kip932 := (await share_groups.describe(client, [group_id])).get(group_id)) is not None:
        if kip932.error_code:
            raise refused(kip932.error_code, f"group {group_id}", kip932.error_message)
        error, shared = await share_groups.share_partitions(client, group_id)
        if error:
            raise refused(error, f"share-partitions of group {group_id}")
        members = sorted((share_groups.member(m) for m in kip932.members), key=lambda m: m["member_id"])
        # a share-partition is read by several members: it has no one owner, and no committed offset
        return {**share_groups.head(kip932), "members": members, "offsets": [], "share_partitions": shared}
    else:
        response = await client.call(DescribeGroupsRequest(groups=[group_id]), DESCRIBE_GROUPS_VERSION)
        described = response.groups[0]
        if described.error_code:
            raise refused(described.error_code, f"group {group_id}", described.error_message)
        if described.group_state == "Dead":
            raise ConsoleError(404, f"group {group_id} does not exist")
        head = {"group": group_id, "state": described.group_state, "group_type": "classic",
                "protocol_type": described.protocol_type, "protocol": described.protocol_data}
        members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                    "assignment": [f"{t}-{p}" for t, p in decode_assignment(bytes(m.member_assignment)) or []]}
                   for m in described.members]
    owners: dict[tuple[str, int], str] = {}
    for member in members:
        for name in member["assignment"]:
            topic, _, partition = name.rpartition("-")
            owners[(topic, int(partition))] = member["member_id"]
    offsets = await committed(client, group_id)
    keys = sorted(set(offsets) | set(owners))
    ends = await list_offsets(client, keys, LATEST)
    rows = []
    for key in keys:
        current, end = offsets.get(key), ends.get(key, -1)
        rows.append({"topic": key[0], "partition": key[1], "committed_offset": current, "end_offset": end,
                     "lag": None if current is None or end < 0 else max(0, end - current),
                     "member_id": owners.get(key)})
    return {**head, "members": members, "offsets": rows}
