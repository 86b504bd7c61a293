"""What `pybroker topics ...` asks the broker: Metadata, ListOffsets, DescribeConfigs, CreateTopics,
DeleteTopics and IncrementalAlterConfigs, turned into plain rows. A refusal is a `WireError` carrying
the broker's error name and message."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from pybroker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic

TOPIC_RESOURCE = 2
EARLIEST, LATEST = -2, -1
SET, DELETE = 0, 1
DEFAULT_CONFIG_SOURCE = 5


def error_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


def check(code: int, message: str | None, what: str) -> None:
    if code:
        name = error_name(code)
        raise WireError(f"{what}: {name}" + (f" ({message})" if message else ""), name)


def metadata(client: WireClient, names: list[str] | None) -> list[Any]:
    topics = None if names is None else [MetadataRequestTopic(name=name) for name in names]
    response = client.call(MetadataRequest(topics=topics, allow_auto_topic_creation=False), max_version=12)
    return sorted(response.topics, key=lambda t: t.name or "")


def list_topics(client: WireClient, include_internal: bool) -> list[dict[str, Any]]:
    return [{"topic": t.name, "partitions": len(t.partitions), "topic_id": str(t.topic_id)}
            for t in metadata(client, None) if include_internal or not t.is_internal]


def list_offsets(client: WireClient, partitions: Iterable[tuple[str, int]], timestamp: int,
                 isolation_level: int = 0) -> dict[tuple[str, int], int]:
    """The offset for `timestamp` (EARLIEST, LATEST or ms) of each partition; -1 where there is none.
    Under read_committed (`isolation_level` 1) LATEST is the last stable offset."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return {}
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                                                 for p in sorted(parts)])
        for topic, parts in sorted(by_topic.items())])
    response = client.call(request, max_version=7)
    offsets: dict[tuple[str, int], int] = {}
    for topic in response.topics:
        for part in topic.partitions:
            check(part.error_code, None, f"ListOffsets {topic.name}-{part.partition_index}")
            offsets[(topic.name, part.partition_index)] = part.offset
    return offsets


MAX_TIMESTAMP = -3
#: `--time` words, as kafka-get-offsets' -1/-2/-3
TIME_WORDS = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}


def offsets_at(client: WireClient, partitions: Iterable[tuple[str, int]], timestamp: int) -> list[dict[str, Any]]:
    """ListOffsets with the timestamps: per partition the offset (and its record's timestamp) for `timestamp`
    (EARLIEST, LATEST, MAX_TIMESTAMP or ms: the first record at or after it; none: offset null)."""
    request = ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                                                 for t, p in sorted(partitions) if t == topic])
        for topic in sorted({t for t, _ in partitions})])
    response = client.call(request, max_version=8)
    rows = []
    for topic in response.topics:
        for part in sorted(topic.partitions, key=lambda p: p.partition_index):
            check(part.error_code, None, f"ListOffsets {topic.name}-{part.partition_index}")
            rows.append({"topic": topic.name, "partition": part.partition_index,
                         "offset": part.offset if part.offset >= 0 else None,
                         "timestamp": part.timestamp if part.timestamp >= 0 else None})
    return rows


def delete_records(client: WireClient, before: Mapping[tuple[str, int], int]) -> list[dict[str, Any]]:
    """DeleteRecords: move each partition's log start up to its offset (LATEST: its end); the new starts."""
    request = DeleteRecordsRequest(timeout_ms=30_000, topics=[
        DeleteRecordsTopic(name=topic, partitions=[DeleteRecordsPartition(partition_index=p, offset=o)
                                                   for (t, p), o in sorted(before.items()) if t == topic])
        for topic in sorted({t for t, _ in before})])
    response = client.call(request, max_version=2)
    rows = []
    for topic in response.topics:
        for part in sorted(topic.partitions, key=lambda p: p.partition_index):
            check(part.error_code, None, f"DeleteRecords {topic.name}-{part.partition_index}")
            rows.append({"topic": topic.name, "partition": part.partition_index, "low_watermark": part.low_watermark})
    return rows


def topic_configs(client: WireClient, topic: str, *, all_keys: bool = False) -> dict[str, str | None]:
    response = client.call(DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=None)]), max_version=4)
    result = response.results[0]
    check(result.error_code, result.error_message, f"DescribeConfigs {topic}")
    return {entry.name: entry.value for entry in result.configs
            if all_keys or entry.config_source != DEFAULT_CONFIG_SOURCE}


def describe_topics(client: WireClient, names: list[str] | None, include_internal: bool = False
                    ) -> list[dict[str, Any]]:
    """Every partition of the named topics (of all topics without names; internal ones such as
    `__consumer_offsets` only with `include_internal`, as Kafka's `--exclude-internal` keeps them out)."""
    topics = metadata(client, names or None)
    if not names and not include_internal:
        topics = [t for t in topics if not t.is_internal]
    for topic in topics:
        check(topic.error_code, None, f"topic {topic.name}")
    keys = [(t.name, p.partition_index) for t in topics for p in t.partitions]
    starts = list_offsets(client, keys, EARLIEST)
    ends = list_offsets(client, keys, LATEST)
    out: list[dict[str, Any]] = []
    for topic in topics:
        configs = topic_configs(client, topic.name)
        for part in sorted(topic.partitions, key=lambda p: p.partition_index):
            key = (topic.name, part.partition_index)
            out.append({"topic": topic.name, "partition": part.partition_index, "leader": part.leader_id,
                        "replicas": part.replica_nodes, "isr": part.isr_nodes,
                        "log_start_offset": starts.get(key), "log_end_offset": ends.get(key),
                        "topic_id": str(topic.topic_id), "configs": configs})
    return out


def create_topic(client: WireClient, name: str, partitions: int, replication_factor: int,
                 configs: Mapping[str, str], *, if_not_exists: bool = False) -> dict[str, Any]:
    """CreateTopics; with `if_not_exists` an existing topic is no error (kafka-topics' --if-not-exists)."""
    request = CreateTopicsRequest(timeout_ms=30_000, topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
    result = client.call(request, max_version=7).topics[0]
    if if_not_exists and result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
        topic = metadata(client, [name])[0]
        return {"topic": name, "partitions": len(topic.partitions), "topic_id": str(topic.topic_id), "created": False}
    check(result.error_code, result.error_message, f"cannot create {name}")
    return {"topic": name, "partitions": partitions, "topic_id": str(result.topic_id), "created": True}


def add_partitions(client: WireClient, name: str, total: int | None, more: int | None) -> dict[str, Any]:
    """CreatePartitions: grow a topic to `total` partitions (or by `more`); partitions never shrink."""
    topics = metadata(client, [name])
    check(topics[0].error_code, None, f"topic {name}")
    current = len(topics[0].partitions)
    target = total if total is not None else current + (more or 0)
    request = CreatePartitionsRequest(timeout_ms=30_000, validate_only=False, topics=[
        CreatePartitionsTopic(name=name, count=target, assignments=None)])
    result = client.call(request, max_version=3).results[0]
    check(result.error_code, result.error_message, f"cannot add partitions to {name}")
    return {"topic": name, "partitions_before": current, "partitions": target}


def delete_topics(client: WireClient, names: list[str], *, if_exists: bool = False) -> list[dict[str, Any]]:
    """DeleteTopics; with `if_exists` a topic that is not there is skipped (kafka-topics' --if-exists)."""
    response = client.call(DeleteTopicsRequest(topic_names=names, timeout_ms=30_000), max_version=5)
    rows = []
    for result in response.responses:
        if if_exists and result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            rows.append({"topic": result.name, "deleted": False})
            continue
        check(result.error_code, result.error_message, f"cannot delete {result.name}")
        rows.append({"topic": result.name, "deleted": True})
    return rows


def alter_configs(client: WireClient, resource_type: int, name: str, set_: Mapping[str, str],
                  delete: Iterable[str]) -> None:
    """IncrementalAlterConfigs of one resource (a topic, or the broker: its dynamic keys)."""
    configs = [AlterableConfig(name=k, config_operation=SET, value=v) for k, v in set_.items()]
    configs += [AlterableConfig(name=k, config_operation=DELETE, value=None) for k in delete]
    if not configs:
        raise WireError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    response = client.call(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=resource_type, resource_name=name, configs=configs)]), max_version=1)
    result = response.responses[0]
    check(result.error_code, result.error_message, f"cannot alter {name or 'the broker'}")


def alter_topic_config(client: WireClient, name: str, set_: Mapping[str, str], delete: Iterable[str]
                       ) -> dict[str, str | None]:
    alter_configs(client, TOPIC_RESOURCE, name, set_, delete)
    return topic_configs(client, name)
