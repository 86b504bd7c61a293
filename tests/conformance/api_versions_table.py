"""The floor of the suite: one scenario per (API, version) pybroker advertises, generated from the table.

Each sends one request of that API at that version to a fresh broker: built with sensible values where
`SENSIBLE` has a builder for the API (a topic of the scenario's own, created first when the request needs
one; a group; a client name), and otherwise from the message's own defaults (empty lists, empty names),
which every API must answer as Kafka does too. Scenario ids read `api/<ApiName>/v<N>`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pybroker.broker.dispatch import load_handlers, supported_versions
from pybroker.broker.handlers.api_versions import OFF_UNLESS
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import REQUESTS
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pybroker.protocol.messages.describe_acls import DescribeAclsRequest
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from pybroker.protocol.messages.describe_producers import DescribeProducersRequest
from pybroker.protocol.messages.describe_producers import TopicRequest as ProducersTopic
from pybroker.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from pybroker.protocol.messages.describe_topic_partitions import TopicRequest as PartitionsTopic
from pybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from pybroker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from tests.conformance import recording
from tests.conformance import scenarios as s
from tests.conformance.registry import Scenario, add
from tests.conformance.side import Side

Builder = Callable[[Side, int], Awaitable[Any]]
FAMILY = "api_versions_table"
TOPIC_RESOURCE = 2


async def _topic(side: Side, records: bool = False) -> str:
    """The scenario's topic, created (and given three records) before the request under test."""
    name = side.name()
    await side.raw(s.create(s.topic(name)), 7)
    await side.created(name)
    if records:
        await side.raw(s.produce(name), 9)
    return name


async def _produce(side: Side, version: int) -> Any:
    return s.produce(await _topic(side))


async def _fetch(side: Side, version: int) -> Any:
    name = await _topic(side, records=True)
    return s.fetch(name, 0, topic_id=await side.created(name))


async def _list_offsets(side: Side, version: int) -> Any:
    return s.list_offsets(await _topic(side, records=True), -1)


async def _metadata(side: Side, version: int) -> Any:
    return s.metadata(await _topic(side))


async def _api_versions(side: Side, version: int) -> Any:
    return ApiVersionsRequest(client_software_name="conformance", client_software_version="1.0")


async def _create_topics(side: Side, version: int) -> Any:
    return s.create(s.topic(side.name(), partitions=2, configs={"retention.ms": "3600000"}), validate_only=version >= 1)


async def _delete_topics(side: Side, version: int) -> Any:
    name = await _topic(side)
    return DeleteTopicsRequest(topics=[DeleteTopicState(name=name)], topic_names=[name], timeout_ms=10_000)


async def _delete_records(side: Side, version: int) -> Any:
    name = await _topic(side, records=True)
    return DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=name, partitions=[
        DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=10_000)


async def _create_partitions(side: Side, version: int) -> Any:
    return CreatePartitionsRequest(topics=[CreatePartitionsTopic(name=await _topic(side), count=3)],
                                   timeout_ms=10_000, validate_only=True)


async def _describe_configs(side: Side, version: int) -> Any:
    return DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=await _topic(side), configuration_keys=["cleanup.policy"])])


async def _offset_for_leader_epoch(side: Side, version: int) -> Any:
    return OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(
        topic=await _topic(side, records=True), partitions=[OffsetForLeaderPartition(partition=0, leader_epoch=0)])])


async def _offset_commit(side: Side, version: int) -> Any:
    return OffsetCommitRequest(group_id=side.name("g"), topics=[OffsetCommitRequestTopic(
        name=await _topic(side), partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])


async def _offset_fetch(side: Side, version: int) -> Any:
    name = await _topic(side)
    if version >= 8:
        return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=side.name("g"), topics=[
            OffsetFetchRequestTopics(name=name, partition_indexes=[0])])])
    return OffsetFetchRequest(group_id=side.name("g"), topics=[OffsetFetchRequestTopic(name=name, partition_indexes=[0])])


async def _find_coordinator(side: Side, version: int) -> Any:
    return FindCoordinatorRequest(key=side.name("g"), coordinator_keys=[side.name("g")])


async def _join_group(side: Side, version: int) -> Any:
    return JoinGroupRequest(group_id=side.name("g"), session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                            protocol_type="consumer", protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")])


async def _describe_groups(side: Side, version: int) -> Any:
    return DescribeGroupsRequest(groups=[side.name("g")])


async def _init_producer_id(side: Side, version: int) -> Any:
    return InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)


async def _describe_producers(side: Side, version: int) -> Any:
    return DescribeProducersRequest(topics=[ProducersTopic(name=await _topic(side, records=True), partition_indexes=[0])])


ANY = 1  # resource type, pattern type, operation and permission filters: any


async def _describe_acls(side: Side, version: int) -> Any:
    return DescribeAclsRequest(resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY,
                               principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY)


async def _describe_topic_partitions(side: Side, version: int) -> Any:
    return DescribeTopicPartitionsRequest(topics=[PartitionsTopic(name=await _topic(side))])


SENSIBLE: dict[int, Builder] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.API_VERSIONS: _api_versions,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: _describe_configs,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.DESCRIBE_ACLS: _describe_acls,
}


# differences found and not fixed, by scenario id: each is also named in docs/skipped-features.md
KNOWN: dict[str, str] = {
    **{f"api/CreateTopics/v{v}": (
        "CreateTopics v5+: the configs of a new topic: Kafka 4.4 lists 14 more (tiered storage's remote.* and "
        "local.retention.*, compression levels, replication throttles, max.decompressed.message.bytes, "
        "errors.deadletterqueue.group.enable), which pybroker does not have, and reports min.insync.replicas "
        "as a cluster-wide dynamic default (source 3), which a KRaft cluster's format writes")
        for v in (5, 6, 7)},
    **{f"api/AddPartitionsToTxn/v{v}": (
        "AddPartitionsToTxn v4+ with no transactions (a broker's verify batch): Kafka 4.4 never answers it; "
        "pybroker answers with empty results") for v in (4, 5)},
    "api/ListConfigResources/v1": (
        "ListConfigResources: Kafka's node lists its internal topics, made when the warm-up found its "
        "coordinators, and its broker logger before its broker; the fresh pybroker has no internal topic yet"),
    **{f"api/Produce/v{v}": (
        "Produce v0-2 (old message formats): both advertise them (librdkafka needs it to enable compression); "
        "Kafka 4 closes the connection, pybroker answers UNSUPPORTED_VERSION per partition") for v in (0, 1, 2)},
    "api/GetTelemetrySubscriptions/v0": (
        "GetTelemetrySubscriptions: Kafka without a telemetry plugin answers delta_temporality true; pybroker's "
        "own telemetry answers false (cumulative), which its metrics store expects"),
}
# the ApiVersions answer whose recording says which versions Kafka serves (the known differences of the
# versions Kafka does not serve follow from it)
VERSIONS_OF_KAFKA = "api/ApiVersions/v3"


def kafka_ranges() -> dict[int, tuple[int, int]]:
    """The versions Kafka advertises, API by API, as recorded (empty before the first recording)."""
    answers = recording.load(FAMILY).get(VERSIONS_OF_KAFKA) or [{}]
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in answers[0].get("api_keys", [])}


def known_of(api_key: int, version: int, kafkas: dict[int, tuple[int, int]]) -> str | None:
    """Why this (API, version) cannot answer as Kafka does: a version or API Kafka does not serve."""
    name = _camel(ApiKey(api_key).name)
    if not kafkas:
        return None
    if api_key == ApiKey.API_VERSIONS:
        return _versions_reason(version, kafkas)
    if api_key not in kafkas:  # the telemetry APIs: Kafka answers them, advertised or not
        return KNOWN.get(f"api/{name}/v{version}")
    low, high = kafkas[api_key]
    if version < low:
        return (f"{name} v{version}: pybroker still serves it for old clients; Kafka 4 removed it (KIP-896) "
                f"and closes the connection")
    if version > high:
        return f"{name} v{version}: pybroker advertises it; Kafka 4.4 with its default config serves up to v{high}"
    return KNOWN.get(f"api/{name}/v{version}")


def _versions_reason(version: int, kafkas: dict[int, tuple[int, int]]) -> str:
    """Which APIs' version ranges differ from Kafka's (and, v3+, the features): the ApiVersions difference."""
    ours = {key: (low, high) for key, low, high in advertised_versions()}
    differ = [f"{_camel(ApiKey(k).name)} {ours[k][0]}-{ours[k][1]} (Kafka {kafkas[k][0]}-{kafkas[k][1]})"
              for k in sorted(ours) if k in kafkas and ours[k] != kafkas[k]]
    features = ("; features: Kafka 4.4 also has group.version, kraft.version, share.version, streams.version and "
                "eligible.leader.replicas.version, and metadata.version up to 33 (pybroker 25)") if version >= 3 else ""
    return ("ApiVersions: pybroker still serves versions Kafka 4 removed (KIP-896) and not yet the newest: "
            + ", ".join(differ) + features)


def advertised_versions() -> list[tuple[int, int, int]]:
    """What the default config advertises: the served versions less those a config leaves off."""
    out = []
    for key, low, high in supported_versions():
        first_off, _ = OFF_UNLESS.get(key, (high + 1, ""))
        out.append((key, low, min(high, first_off - 1)))
    return out


def _versions_view(answer: Any, served: dict[int, tuple[int, int]]) -> Any:
    """An ApiVersions answer with only the APIs pybroker serves: the ones Kafka serves beyond them (share
    groups, streams groups, the KRaft APIs) are listed in docs/skipped-features.md, not compared here."""
    if isinstance(answer, dict) and isinstance(answer.get("api_keys"), list):
        answer = {**answer, "api_keys": [k for k in answer["api_keys"] if k["api_key"] in served]}
    return answer


def _scenario(api_key: int, version: int, served: dict[int, tuple[int, int]],
              kafkas: dict[int, tuple[int, int]]) -> Scenario:
    builder = SENSIBLE.get(api_key)

    async def run(side: Side) -> None:
        request = await builder(side, version) if builder else REQUESTS[api_key]()
        await side.call(request, version)
        if api_key == ApiKey.API_VERSIONS:
            side.answers[-1] = _versions_view(side.answers[-1], served)

    name = _camel(ApiKey(api_key).name)
    what = "sensible values" if builder else "the message's defaults"
    return Scenario(f"api/{name}/v{version}", FAMILY, run, f"{name} v{version}, {what}",
                    known=known_of(api_key, version, kafkas))


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _register() -> None:
    load_handlers()
    served = {key: (low, high) for key, low, high in advertised_versions()}
    kafkas = kafka_ranges()
    for key, (low, high) in served.items():
        for version in range(low, high + 1):
            add(_scenario(key, version, served, kafkas))


_register()
