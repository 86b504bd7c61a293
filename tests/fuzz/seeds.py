"""The fuzzer's starting points: golden request frames, captured from stock clients or generated.

A seed file is one request frame without its size prefix, named `k<key>v<version>-<source>-<n>.bin`.
`<source>` is the client that sent it (kafka-python, librdkafka, aiokafka, kcat) or `generated` for an
(api, version) that no stock client sends: those are re-encoded by our codecs from a captured frame of
the same API at the nearest version (so they name the topics and groups the captured traffic made), or
from an example request below (the transaction APIs, which the capture does not drive), or built from
the message's defaults.

Seeds are generated for every version we have a codec for, served or not yet, so an API has its seeds
the day its handler is registered; the campaign feeds only what the broker advertises (`load_seeds`).

    .venv/bin/python -m tests.fuzz.seeds      # refresh only the generated seeds
"""

from __future__ import annotations

import struct
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from pybroker.broker.dispatch import load_handlers, supported_versions
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.frame_codec import decode_request, encode_request
from pybroker.protocol.messages import REQUESTS
from pybroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from pybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from pybroker.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from pybroker.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pybroker.protocol.messages.end_txn import EndTxnRequest
from pybroker.protocol.messages.list_transactions import ListTransactionsRequest
from pybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from pybroker.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
GENERATED = "generated"


def advertised() -> list[tuple[int, int]]:
    """Every (api key, version) the broker's ApiVersions answer advertises."""
    load_handlers()
    return [(key, v) for key, lo, hi in supported_versions() for v in range(lo, hi + 1)]


def codec_versions() -> list[tuple[int, int]]:
    """Every (api key, version) our request codecs read: what seeds are generated for."""
    return [(key, v) for key, cls in sorted(REQUESTS.items()) for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]


# the names the captured traffic creates (kafka-python's scenario in `record_golden`)
_TOPIC, _GROUP, _TXN = "kp-golden", "kp-golden-group", "kp-golden-txn"


def _example_requests() -> dict[int, Any]:
    """Requests for the APIs no captured client sends, shaped as a client would send them (every
    version's fields filled: an encoder writes only those its version has)."""
    topics = [AddPartitionsToTxnTopic(name=_TOPIC, partitions=[0, 1])]
    return {
        ApiKey.ADD_PARTITIONS_TO_TXN: AddPartitionsToTxnRequest(
            transactions=[AddPartitionsToTxnTransaction(transactional_id=_TXN, producer_id=0, producer_epoch=0,
                                                        verify_only=False, topics=topics)],
            v3_and_below_transactional_id=_TXN, v3_and_below_producer_id=0, v3_and_below_producer_epoch=0,
            v3_and_below_topics=topics),
        ApiKey.ADD_OFFSETS_TO_TXN: AddOffsetsToTxnRequest(transactional_id=_TXN, producer_id=0, producer_epoch=0,
                                                          group_id=_GROUP),
        ApiKey.END_TXN: EndTxnRequest(transactional_id=_TXN, producer_id=0, producer_epoch=0, committed=True),
        ApiKey.WRITE_TXN_MARKERS: WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=0, producer_epoch=0, transaction_result=False, coordinator_epoch=0, transaction_version=2,
            topics=[WritableTxnMarkerTopic(name=_TOPIC, partition_indexes=[0])])]),
        ApiKey.TXN_OFFSET_COMMIT: TxnOffsetCommitRequest(
            transactional_id=_TXN, group_id=_GROUP, producer_id=0, producer_epoch=0, generation_id=-1,
            topics=[TxnOffsetCommitRequestTopic(name=_TOPIC, partitions=[TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])]),
        ApiKey.DESCRIBE_PRODUCERS: DescribeProducersRequest(
            topics=[TopicRequest(name=_TOPIC, partition_indexes=[0, 1])]),
        ApiKey.DESCRIBE_TRANSACTIONS: DescribeTransactionsRequest(transactional_ids=[_TXN]),
        ApiKey.LIST_TRANSACTIONS: ListTransactionsRequest(state_filters=["Ongoing"], producer_id_filters=[],
                                                          duration_filter=0, transactional_id_pattern="kp-.*"),
        **_admin_example_requests(),
        **_consumer_group_example_requests(),
        **_streams_group_example_requests(),
        **_share_group_example_requests(),
    }


def _streams_group_example_requests() -> dict[int, Any]:
    """The streams protocol (KIP-1071): a join with a two-subtopology topology (a repartition topic, a
    changelog, a copartition group), a describe asking for the topology description (v1), and a pushed
    description with a source, a processor with a store, a sink and a global store (KIP-1331)."""
    from pybroker.protocol.messages import streams_group_describe as sgd
    from pybroker.protocol.messages import streams_group_heartbeat as sgh
    from pybroker.protocol.messages import streams_group_topology_description_update as sgu

    changelog = sgh.TopicInfo(name="kp-golden-store-changelog", partitions=0, replication_factor=0,
                              topic_configs=[sgh.KeyValue(key="cleanup.policy", value="compact")])
    repartition = sgh.TopicInfo(name="kp-golden-repartition", partitions=0, replication_factor=0, topic_configs=[])
    return {
        ApiKey.STREAMS_GROUP_HEARTBEAT: sgh.StreamsGroupHeartbeatRequest(
            group_id=_GROUP, member_id="kp-golden-member", member_epoch=0, endpoint_information_epoch=0,
            rebalance_timeout_ms=30000, process_id="kp-golden-process",
            user_endpoint=sgh.StreamsGroupHeartbeatRequestEndpoint(host="localhost", port=8080),
            client_tags=[sgh.KeyValue(key="zone", value="a")], task_offsets=[], task_end_offsets=[],
            active_tasks=[], standby_tasks=[], warmup_tasks=[],
            topology=sgh.Topology(epoch=0, subtopologies=[
                sgh.Subtopology(subtopology_id="0", source_topics=[_TOPIC], source_topic_regex=[],
                                state_changelog_topics=[], repartition_sink_topics=[repartition.name],
                                repartition_source_topics=[], copartition_groups=[]),
                sgh.Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[],
                                state_changelog_topics=[changelog], repartition_sink_topics=[],
                                repartition_source_topics=[repartition], copartition_groups=[
                                    sgh.CopartitionGroup(source_topics=[], source_topic_regex=[],
                                                         repartition_source_topics=[0])])])),
        ApiKey.STREAMS_GROUP_DESCRIBE: sgd.StreamsGroupDescribeRequest(
            group_ids=[_GROUP], include_authorized_operations=True, include_topology_description=True),
        ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: sgu.StreamsGroupTopologyDescriptionUpdateRequest(
            group_id=_GROUP, member_id="kp-golden-member", topology_epoch=0,
            topology_description=sgu.TopologyDescription(
                subtopologies=[sgu.TopologyDescriptionSubtopology(subtopology_id="0", nodes=[
                    sgu.TopologyDescriptionNode(name="KSTREAM-SOURCE-0000000000", node_type=1,
                                                source_topics=[_TOPIC], stores=[],
                                                successors=["KSTREAM-AGGREGATE-0000000001"]),
                    sgu.TopologyDescriptionNode(name="KSTREAM-AGGREGATE-0000000001", node_type=2, source_topics=[],
                                                stores=["kp-golden-store"], successors=["KSTREAM-SINK-0000000002"]),
                    sgu.TopologyDescriptionNode(name="KSTREAM-SINK-0000000002", node_type=3, source_topics=[],
                                                sink_topic="kp-golden-out", stores=[], successors=[])])],
                global_stores=[sgu.TopologyDescriptionGlobalStore(
                    source=sgu.TopologyDescriptionNode(name="KSTREAM-SOURCE-0000000003", node_type=1,
                                                       source_topics=["kp-golden-global"], stores=[],
                                                       successors=["KTABLE-SOURCE-0000000004"]),
                    processor=sgu.TopologyDescriptionNode(name="KTABLE-SOURCE-0000000004", node_type=2,
                                                          source_topics=[], stores=["kp-golden-global-store"],
                                                          successors=[]))])),
    }


def _consumer_group_example_requests() -> dict[int, Any]:
    """The consumer group protocol (KIP-848): a join with a subscription and a regex, and a describe."""
    from pybroker.protocol.messages import consumer_group_describe as cgd
    from pybroker.protocol.messages import consumer_group_heartbeat as cgh

    return {
        ApiKey.CONSUMER_GROUP_HEARTBEAT: cgh.ConsumerGroupHeartbeatRequest(
            group_id=_GROUP, member_id="kp-golden-member", member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=[_TOPIC], subscribed_topic_regex="kp-.*", server_assignor="uniform",
            topic_partitions=[]),
        ApiKey.CONSUMER_GROUP_DESCRIBE: cgd.ConsumerGroupDescribeRequest(
            group_ids=[_GROUP], include_authorized_operations=True),
    }


def _share_group_example_requests() -> dict[int, Any]:
    """Share groups (KIP-932): a join, a describe, a fetch with acknowledgements and one acknowledge."""
    from pybroker.protocol.messages import alter_share_group_offsets as aso
    from pybroker.protocol.messages import delete_share_group_offsets as xso
    from pybroker.protocol.messages import describe_share_group_offsets as dso
    from pybroker.protocol.messages import share_acknowledge as sa
    from pybroker.protocol.messages import share_fetch as sf
    from pybroker.protocol.messages import share_group_describe as sgd
    from pybroker.protocol.messages import share_group_heartbeat as sgh

    topic_id = uuid.UUID(int=0x5EED)
    return {
        ApiKey.SHARE_GROUP_HEARTBEAT: sgh.ShareGroupHeartbeatRequest(
            group_id=_GROUP, member_id="kp-golden-share-member", member_epoch=0, subscribed_topic_names=[_TOPIC]),
        ApiKey.SHARE_GROUP_DESCRIBE: sgd.ShareGroupDescribeRequest(group_ids=[_GROUP],
                                                                   include_authorized_operations=True),
        ApiKey.SHARE_FETCH: sf.ShareFetchRequest(
            group_id=_GROUP, member_id="kp-golden-share-member", share_session_epoch=1, max_wait_ms=10, min_bytes=1,
            max_records=500, batch_size=500, topics=[sf.ShareFetchTopic(topic_id=topic_id, partitions=[
                sf.ShareFetchPartition(partition_index=0, acknowledgement_batches=[
                    sf.ShareFetchAcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=[1, 2, 3])])])],
            forgotten_topics_data=[sf.ShareForgottenTopic(topic_id=topic_id, partitions=[1])]),
        ApiKey.SHARE_ACKNOWLEDGE: sa.ShareAcknowledgeRequest(
            group_id=_GROUP, member_id="kp-golden-share-member", share_session_epoch=2, topics=[
                sa.ShareAcknowledgeTopic(topic_id=topic_id, partitions=[sa.ShareAcknowledgePartition(
                    partition_index=0, acknowledgement_batches=[
                        sa.ShareAcknowledgementBatch(first_offset=3, last_offset=3, acknowledge_types=[1])])])]),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: dso.DescribeShareGroupOffsetsRequest(groups=[
            dso.DescribeShareGroupOffsetsRequestGroup(group_id=_GROUP, topics=[
                dso.DescribeShareGroupOffsetsRequestTopic(topic_name=_TOPIC, partitions=[0])])]),
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: aso.AlterShareGroupOffsetsRequest(group_id=_GROUP, topics=[
            aso.AlterShareGroupOffsetsRequestTopic(topic_name=_TOPIC, partitions=[
                aso.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]),
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: xso.DeleteShareGroupOffsetsRequest(group_id=_GROUP, topics=[
            xso.DeleteShareGroupOffsetsRequestTopic(topic_name=_TOPIC)]),
    }


#: an OTLP MetricsData with one gauge point (tests.otlp_payloads: gauge "org.apache.kafka.client.x" = 1.5, topic)
_EXAMPLE_METRICS = bytes.fromhex(
    "0a440a001240123e0a196f72672e6170616368652e6b61666b612e636c69656e742e782a210a1f3a140a05746f706963120b0a096b"
    "702d676f6c64656e21000000000000f83f")


def _admin_example_requests() -> dict[int, Any]:
    """The cluster admin APIs (issue 15): kafka-python's admin sends them, its capture does not yet."""
    from pybroker.protocol.messages import (
        alter_partition_reassignments as apr,
    )
    from pybroker.protocol.messages import (
        alter_replica_log_dirs as arld,
    )
    from pybroker.protocol.messages import (
        describe_quorum,
        describe_topic_partitions,
        elect_leaders,
        get_telemetry_subscriptions,
        list_config_resources,
        list_partition_reassignments,
        push_telemetry,
    )

    return {
        ApiKey.ELECT_LEADERS: elect_leaders.ElectLeadersRequest(election_type=0, timeout_ms=30000, topic_partitions=[
            elect_leaders.TopicPartitions(topic=_TOPIC, partitions=[0, 1])]),
        ApiKey.ALTER_REPLICA_LOG_DIRS: arld.AlterReplicaLogDirsRequest(dirs=[arld.AlterReplicaLogDir(
            path="/var/lib/pybroker/b", topics=[arld.AlterReplicaLogDirTopic(name=_TOPIC, partitions=[0])])]),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: apr.AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            apr.ReassignableTopic(name=_TOPIC, partitions=[apr.ReassignablePartition(partition_index=0, replicas=[1])])]),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments.ListPartitionReassignmentsRequest(
            timeout_ms=30000, topics=[list_partition_reassignments.ListPartitionReassignmentsTopics(
                name=_TOPIC, partition_indexes=[0])]),
        ApiKey.DESCRIBE_QUORUM: describe_quorum.DescribeQuorumRequest(topics=[
            describe_quorum.DescribeQuorumRequestTopicData(topic_name="__cluster_metadata", partitions=[
                describe_quorum.DescribeQuorumRequestPartitionData(partition_index=0)])]),
        ApiKey.LIST_CONFIG_RESOURCES: list_config_resources.ListConfigResourcesRequest(resource_types=[2, 4, 8]),
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: get_telemetry_subscriptions.GetTelemetrySubscriptionsRequest(),
        ApiKey.PUSH_TELEMETRY: push_telemetry.PushTelemetryRequest(
            client_instance_id=uuid.UUID("8a4e1c52-9d3b-4f0e-a6a1-3c1b2d4e5f60"), subscription_id=0, terminating=False,
            compression_type=0, metrics=_EXAMPLE_METRICS),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions.DescribeTopicPartitionsRequest(
            topics=[describe_topic_partitions.TopicRequest(name=_TOPIC)], response_partition_limit=1,
            cursor=describe_topic_partitions.DescribeTopicPartitionsRequestCursor(topic_name=_TOPIC,
                                                                                 partition_index=0)),
    }


def seed_files(directory: Path = GOLDEN_DIR) -> list[Path]:
    return sorted(directory.glob("k*v*-*.bin"))


def key_of(frame: bytes) -> tuple[int, int]:
    api_key, version = struct.unpack_from(">hh", frame)
    return api_key, version


def load_seeds(directory: Path = GOLDEN_DIR, *, all_versions: bool = False) -> dict[tuple[int, int], list[bytes]]:
    """Seed frames by (api key, version), in file-name order (deterministic for the mutator).

    Only the (api, version)s the broker advertises, unless `all_versions`: a seed of an API with no
    handler yet would only ever be answered by closing the connection.
    """
    served = None if all_versions else set(advertised())
    seeds: dict[tuple[int, int], list[bytes]] = defaultdict(list)
    for path in seed_files(directory):
        frame = path.read_bytes()
        if served is None or key_of(frame) in served:
            seeds[key_of(frame)].append(frame)
    return dict(seeds)


def _captured(directory: Path) -> dict[tuple[int, int], list[bytes]]:
    seeds: dict[tuple[int, int], list[bytes]] = defaultdict(list)
    for path in seed_files(directory):
        if f"-{GENERATED}-" not in path.name:
            frame = path.read_bytes()
            seeds[key_of(frame)].append(frame)
    return seeds


def generate(api_key: int, version: int, captured: dict[tuple[int, int], list[bytes]]) -> bytes:
    """A frame for (api_key, version): a captured request of the nearest version re-encoded, else the
    API's example request, else its defaults."""
    others = sorted((abs(v - version), v) for (k, v) in captured if k == api_key)
    for _, other in others:
        for frame in captured[(api_key, other)]:
            try:
                _, request = decode_request(bytearray(frame))
                return encode_request(request, version, 0, "pybroker-generated")[4:]
            except Exception:  # a value the other version cannot carry: try the next one
                continue
    request = _example_requests().get(api_key) or REQUESTS[api_key]()
    return encode_request(request, version, 0, "pybroker-generated")[4:]


def write_generated_seeds(directory: Path = GOLDEN_DIR) -> int:
    """Write a generated seed for every (api, version) we have a codec for that no captured frame covers."""
    for old in directory.glob(f"*-{GENERATED}-*.bin"):
        old.unlink()
    captured = _captured(directory)
    written = 0
    for api_key, version in codec_versions():
        if (api_key, version) not in captured:
            frame = generate(api_key, version, captured)
            (directory / f"k{api_key:02d}v{version:02d}-{GENERATED}-0.bin").write_bytes(frame)
            written += 1
    return written


if __name__ == "__main__":
    print(f"{write_generated_seeds()} generated seeds written to {GOLDEN_DIR}")
