"""The console's changes: create and delete a topic, alter or delete a topic config or a broker's dynamic
config, reset a group's offsets.

Each is the Kafka request an admin client sends (CreateTopics, DeleteTopics, IncrementalAlterConfigs,
OffsetCommit), so the broker's own validation, caps and ACLs apply. Deleting a topic needs the name typed
again (`confirm`), and every change is a POST with the CSRF token (see `routes`). Offsets are reset only
while the group is Empty (no member could overwrite them a moment later), as kafka-consumer-groups
insists; `preview` answers the plan without committing it.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.console import params as p
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.params import ConsoleError
from pybroker.broker.console.reads import (
    BROKER_RESOURCE,
    EARLIEST,
    LATEST,
    TOPIC_RESOURCE,
    committed,
    list_offsets,
    metadata,
    refused,
)
from pybroker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

SET, DELETE = 0, 1
TIMEOUT_MS = 30_000
RESET_TARGETS = ("earliest", "latest", "offset", "timestamp")
#: groups whose offsets the console resets: nobody is consuming
RESETTABLE_STATES = ("Empty",)


async def create_topic(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    name = p.text(body, "name", max_len=p.MAX_TOPIC_NAME)
    partitions = p.integer(body, "partitions", 1, p.MAX_PARTITIONS, 1)
    configs = p.string_map(body, "configs")
    request = CreateTopicsRequest(timeout_ms=TIMEOUT_MS, validate_only=p.flag(body, "validate_only"), topics=[
        CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1,
                       configs=[CreatableTopicConfig(name=k, value=v) for k, v in sorted(configs.items())])])
    result = (await client.call(request)).topics[0]
    if result.error_code:
        raise refused(result.error_code, f"create {name}", result.error_message)
    return {"name": name, "partitions": result.num_partitions, "topic_id": str(result.topic_id)}


async def delete_topic(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    name = p.text(body, "name", max_len=p.MAX_TOPIC_NAME)
    if body.get("confirm") != name:
        raise p.bad("type the topic's name in confirm to delete it")
    version = 5  # names, not topic ids (v6+ takes `topics` with ids)
    request = DeleteTopicsRequest(topic_names=[name], topics=[DeleteTopicState(name=name)], timeout_ms=TIMEOUT_MS)
    result = (await client.call(request, version)).responses[0]
    if result.error_code:
        raise refused(result.error_code, f"delete {name}", result.error_message)
    return {"name": name, "deleted": True}


async def alter_config(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    """One topic config set (`value`) or its override removed (`value` null): ALTER_CONFIGS on the topic."""
    name = p.text(body, "name", max_len=p.MAX_TOPIC_NAME)
    return await _alter(client, TOPIC_RESOURCE, name, body)


async def alter_broker_config(client: LocalClient, node_id: int, body: dict[str, Any]) -> dict[str, Any]:
    """One of this broker's dynamic configs set or removed, as `kafka-configs --entity-type brokers
    --entity-name <id> --alter` does: ALTER_CONFIGS on the cluster; the broker refuses a key it cannot
    change while running (INVALID_CONFIG, with Kafka's words)."""
    return await _alter(client, BROKER_RESOURCE, str(node_id), body)


async def _alter(client: LocalClient, resource_type: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
    key = p.text(body, "key", max_len=p.MAX_NAME)
    value = p.optional_text(body, "value", max_len=p.MAX_CONFIG_VALUE)
    operation = DELETE if value is None else SET
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[AlterableConfig(name=key, config_operation=operation, value=value)])])
    result = (await client.call(request)).responses[0]
    if result.error_code:
        raise refused(result.error_code, f"alter {key} of {name}", result.error_message)
    return {"name": name, "key": key, "value": value, "deleted": value is None}


async def reset_offsets(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    group = p.text(body, "group", max_len=p.MAX_NAME)
    topic = p.optional_text(body, "topic", max_len=p.MAX_TOPIC_NAME)
    to = p.choice(body, "to", RESET_TARGETS, "earliest")
    preview = p.flag(body, "preview")
    described = (await client.call(DescribeGroupsRequest(groups=[group]), 5)).groups[0]
    if described.error_code:
        raise refused(described.error_code, f"group {group}", described.error_message)
    if described.group_state not in RESETTABLE_STATES:
        raise ConsoleError(409, f"group {group} is {described.group_state}: offsets can only be reset while it is "
                                "Empty (stop its consumers first)")
    current = await committed(client, group)
    if topic:
        found = await metadata(client, [topic])
        if not found or found[0].error_code:
            raise refused(found[0].error_code if found else 3, f"topic {topic}")
        keys = sorted((topic, part.partition_index) for part in found[0].partitions)
    else:
        keys = sorted(current)
    if not keys:
        raise p.bad("the group has no committed offsets; name a topic")
    starts = await list_offsets(client, keys, EARLIEST)
    ends = await list_offsets(client, keys, LATEST)
    if to == "offset":
        wanted = p.integer(body, "offset", 0, p.INT64_MAX)
    elif to == "timestamp":
        at = await list_offsets(client, keys, p.integer(body, "timestamp", 0, p.INT64_MAX))
    plan = []
    for key in keys:
        start, end = starts.get(key, -1), ends.get(key, -1)
        if start < 0 or end < 0:
            raise refused(3, f"{key[0]}-{key[1]}")
        if to == "earliest":
            new = start
        elif to == "latest":
            new = end
        elif to == "offset":
            new = min(max(wanted, start), end)  # clamped into the log, as kafka-consumer-groups does
        else:
            new = at[key] if at.get(key, -1) >= 0 else end
        plan.append({"topic": key[0], "partition": key[1], "current_offset": current.get(key), "new_offset": new})
    if not preview:
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for row in plan:
            by_topic.setdefault(row["topic"], []).append(OffsetCommitRequestPartition(
                partition_index=row["partition"], committed_offset=row["new_offset"], committed_metadata=""))
        request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                      topics=[OffsetCommitRequestTopic(name=t, partitions=ps)
                                              for t, ps in by_topic.items()])
        response = await client.call(request, 7)
        for answer in response.topics:
            for part in answer.partitions:
                if part.error_code:
                    raise refused(part.error_code, f"commit {answer.name}-{part.partition_index}")
    return {"group": group, "applied": not preview, "plan": plan}
