"""The ACL matrix: every served API through the real server, as a principal that is allowed, denied, denied by
a DENY beside its ALLOW, allowed by a PREFIXED pattern, and a super user.

The connection's principal is set on the server side after connect (as TLS or SASL will set it), so
each case speaks as whom it means to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    ResourceType,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_share_group_offsets,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_topics,
    describe_acls,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_offsets,
    list_partition_reassignments,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    streams_group_describe,
    streams_group_heartbeat,
    streams_group_topology_description_update,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from tests.unit.broker.security.acl_kit import (
    ADMIN,
    ALICE,
    GROUP,
    PT,
    RT,
    TOPIC,
    TXN,
    Op,
    Perm,
    acl,
    connect_as,
    grant,
    one_record,
)


@dataclass
class Probe:
    """One API's request, what it needs, and where its answer says whether it was let in."""

    name: str
    version: int
    request: Callable[[], Any]
    needs: list[tuple[ResourceType, str, AclOperation]]  # the first one is the one the matrix denies
    denial: ErrorCode
    code: Callable[[Any], int]
    others: list[int] = field(default_factory=list)


def _topic_entry(attr: str, name_attr: str = "name", parts: str = "partitions") -> Callable[[Any], int]:
    def code(response: Any) -> int:
        entry = next(t for t in getattr(response, attr) if getattr(t, name_attr) == TOPIC)
        return int(getattr(entry, parts)[0].error_code)
    return code


def _txn_offset_commit() -> txn_offset_commit.TxnOffsetCommitRequest:
    return txn_offset_commit.TxnOffsetCommitRequest(
        transactional_id=TXN, group_id=GROUP, producer_id=1, producer_epoch=0, topics=[
            txn_offset_commit.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                txn_offset_commit.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0)])])


PROBES = [
    Probe("Produce", 9, lambda: produce.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        produce.TopicProduceData(name=TOPIC, partition_data=[produce.PartitionProduceData(index=0, records=one_record())])]),
        [(RT.TOPIC, TOPIC, Op.WRITE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        _topic_entry("responses", parts="partition_responses")),
    Probe("Fetch", 12, lambda: fetch.FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        fetch.FetchTopic(topic=TOPIC, partitions=[fetch.FetchPartition(partition=0, fetch_offset=0,
                                                                        partition_max_bytes=1 << 20)])]),
        [(RT.TOPIC, TOPIC, Op.READ)], ErrorCode.TOPIC_AUTHORIZATION_FAILED, _topic_entry("responses", "topic")),
    Probe("ListOffsets", 7, lambda: list_offsets.ListOffsetsRequest(replica_id=-1, topics=[
        list_offsets.ListOffsetsTopic(name=TOPIC, partitions=[list_offsets.ListOffsetsPartition(timestamp=-1)])]),
        [(RT.TOPIC, TOPIC, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED, _topic_entry("topics")),
    Probe("Metadata", 12, lambda: metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name=TOPIC)],
                                                           allow_auto_topic_creation=False),
        [(RT.TOPIC, TOPIC, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        lambda r: next(t.error_code for t in r.topics if t.name == TOPIC)),
    Probe("OffsetCommit", 8, lambda: offset_commit.OffsetCommitRequest(group_id=GROUP, member_id="", topics=[
        offset_commit.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            offset_commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]),
        [(RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
        _topic_entry("topics")),
    Probe("OffsetCommit(topic)", 8, lambda: offset_commit.OffsetCommitRequest(group_id=GROUP, member_id="", topics=[
        offset_commit.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            offset_commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]),
        [(RT.TOPIC, TOPIC, Op.READ), (RT.GROUP, GROUP, Op.READ)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        _topic_entry("topics")),
    Probe("OffsetFetch", 7, lambda: offset_fetch.OffsetFetchRequest(group_id=GROUP, topics=[
        offset_fetch.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]),
        [(RT.GROUP, GROUP, Op.DESCRIBE), (RT.TOPIC, TOPIC, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
        lambda r: r.error_code),
    Probe("OffsetFetch(topic)", 7, lambda: offset_fetch.OffsetFetchRequest(group_id=GROUP, topics=[
        offset_fetch.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]),
        [(RT.TOPIC, TOPIC, Op.DESCRIBE), (RT.GROUP, GROUP, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        _topic_entry("topics")),
    Probe("OffsetFetch v8", 8, lambda: offset_fetch.OffsetFetchRequest(groups=[
        offset_fetch.OffsetFetchRequestGroup(group_id=GROUP, topics=None)]),
        [(RT.GROUP, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.groups[0].error_code),
    Probe("FindCoordinator", 3, lambda: find_coordinator.FindCoordinatorRequest(key=GROUP, key_type=0),
          [(RT.GROUP, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("FindCoordinator v4 txn", 4, lambda: find_coordinator.FindCoordinatorRequest(
        key_type=1, coordinator_keys=[TXN]),
          [(RT.TRANSACTIONAL_ID, TXN, Op.DESCRIBE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          lambda r: r.coordinators[0].error_code),
    Probe("JoinGroup", 5, lambda: join_group.JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
        protocols=[join_group.JoinGroupRequestProtocol(name="range", metadata=b"")]),
          [(RT.GROUP, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("SyncGroup", 3, lambda: sync_group.SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="m"),
          [(RT.GROUP, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("Heartbeat", 3, lambda: heartbeat.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m"),
          [(RT.GROUP, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("LeaveGroup", 2, lambda: leave_group.LeaveGroupRequest(group_id=GROUP, member_id="m"),
          [(RT.GROUP, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("DescribeGroups", 5, lambda: describe_groups.DescribeGroupsRequest(groups=[GROUP]),
          [(RT.GROUP, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.groups[0].error_code),
    Probe("DeleteGroups", 1, lambda: delete_groups.DeleteGroupsRequest(groups_names=[GROUP]),
          [(RT.GROUP, GROUP, Op.DELETE)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.results[0].error_code),
    Probe("OffsetDelete", 0, lambda: offset_delete.OffsetDeleteRequest(group_id=GROUP, topics=[
        offset_delete.OffsetDeleteRequestTopic(name=TOPIC, partitions=[
            offset_delete.OffsetDeleteRequestPartition(partition_index=0)])]),
          [(RT.GROUP, GROUP, Op.DELETE), (RT.TOPIC, TOPIC, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("TxnOffsetCommit", 3, lambda: _txn_offset_commit(),
          [(RT.TRANSACTIONAL_ID, TXN, Op.WRITE), (RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.READ)],
          ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, _topic_entry("topics")),
    Probe("TxnOffsetCommit(group)", 3, lambda: _txn_offset_commit(),
          [(RT.GROUP, GROUP, Op.READ), (RT.TRANSACTIONAL_ID, TXN, Op.WRITE), (RT.TOPIC, TOPIC, Op.READ)],
          ErrorCode.GROUP_AUTHORIZATION_FAILED, _topic_entry("topics")),
    Probe("TxnOffsetCommit(topic)", 3, lambda: _txn_offset_commit(),
          [(RT.TOPIC, TOPIC, Op.READ), (RT.TRANSACTIONAL_ID, TXN, Op.WRITE), (RT.GROUP, GROUP, Op.READ)],
          ErrorCode.TOPIC_AUTHORIZATION_FAILED, _topic_entry("topics")),
    Probe("DescribeTransactions", 0, lambda: describe_transactions.DescribeTransactionsRequest(transactional_ids=[TXN]),
          [(RT.TRANSACTIONAL_ID, TXN, Op.DESCRIBE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          lambda r: r.transaction_states[0].error_code),
    Probe("DescribeProducers", 0, lambda: describe_producers.DescribeProducersRequest(topics=[
        describe_producers.TopicRequest(name=TOPIC, partition_indexes=[0])]),
          [(RT.TOPIC, TOPIC, Op.READ)], ErrorCode.TOPIC_AUTHORIZATION_FAILED, _topic_entry("topics")),
    Probe("WriteTxnMarkers", 1, lambda: write_txn_markers.WriteTxnMarkersRequest(markers=[
        write_txn_markers.WritableTxnMarker(producer_id=7, producer_epoch=0, transaction_result=False,
                                            coordinator_epoch=0, topics=[write_txn_markers.WritableTxnMarkerTopic(
                                                name=TOPIC, partition_indexes=[0])])]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.markers[0].topics[0].partitions[0].error_code),
    Probe("CreateTopics", 5, lambda: create_topics.CreateTopicsRequest(topics=[
        create_topics.CreatableTopic(name="orders-new", num_partitions=1, replication_factor=1)], timeout_ms=5000,
        validate_only=True),
          [(RT.TOPIC, "orders-new", Op.CREATE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          lambda r: r.topics[0].error_code),
    Probe("DeleteTopics", 5, lambda: delete_topics.DeleteTopicsRequest(topic_names=[TOPIC], timeout_ms=5000),
          [(RT.TOPIC, TOPIC, Op.DELETE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda r: r.responses[0].error_code),
    Probe("DeleteRecords", 1, lambda: delete_records.DeleteRecordsRequest(topics=[
        delete_records.DeleteRecordsTopic(name=TOPIC, partitions=[
            delete_records.DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=5000),
          [(RT.TOPIC, TOPIC, Op.DELETE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED, _topic_entry("topics")),
    Probe("CreatePartitions", 1, lambda: create_partitions.CreatePartitionsRequest(topics=[
        create_partitions.CreatePartitionsTopic(name=TOPIC, count=5, assignments=None)], timeout_ms=5000,
        validate_only=True),
          [(RT.TOPIC, TOPIC, Op.ALTER)], ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda r: r.results[0].error_code),
    Probe("InitProducerId txn", 2, lambda: init_producer_id.InitProducerIdRequest(
        transactional_id=TXN, transaction_timeout_ms=60000),
          [(RT.TRANSACTIONAL_ID, TXN, Op.WRITE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("InitProducerId 2pc", 6, lambda: init_producer_id.InitProducerIdRequest(
        transactional_id=TXN, transaction_timeout_ms=60000, enable_2pc=True),
          [(RT.TRANSACTIONAL_ID, TXN, Op.TWO_PHASE_COMMIT), (RT.TRANSACTIONAL_ID, TXN, Op.WRITE)],
          ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("AddPartitionsToTxn", 3, lambda: add_partitions_to_txn.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN, v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[add_partitions_to_txn.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]),
          [(RT.TRANSACTIONAL_ID, TXN, Op.WRITE), (RT.TOPIC, TOPIC, Op.WRITE)],
          ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code),
    Probe("AddPartitionsToTxn(topic)", 3, lambda: add_partitions_to_txn.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN, v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[add_partitions_to_txn.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]),
          [(RT.TOPIC, TOPIC, Op.WRITE), (RT.TRANSACTIONAL_ID, TXN, Op.WRITE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code),
    Probe("AddPartitionsToTxn v4", 4, lambda: add_partitions_to_txn.AddPartitionsToTxnRequest(transactions=[
        add_partitions_to_txn.AddPartitionsToTxnTransaction(
            transactional_id=TXN, producer_id=1, producer_epoch=0, verify_only=True,
            topics=[add_partitions_to_txn.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])])]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("AddOffsetsToTxn", 3, lambda: add_offsets_to_txn.AddOffsetsToTxnRequest(
        transactional_id=TXN, producer_id=1, producer_epoch=0, group_id=GROUP),
          [(RT.TRANSACTIONAL_ID, TXN, Op.WRITE), (RT.GROUP, GROUP, Op.READ)],
          ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("AddOffsetsToTxn(group)", 3, lambda: add_offsets_to_txn.AddOffsetsToTxnRequest(
        transactional_id=TXN, producer_id=1, producer_epoch=0, group_id=GROUP),
          [(RT.GROUP, GROUP, Op.READ), (RT.TRANSACTIONAL_ID, TXN, Op.WRITE)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("EndTxn", 3, lambda: end_txn.EndTxnRequest(
        transactional_id=TXN, producer_id=1, producer_epoch=0, committed=True),
          [(RT.TRANSACTIONAL_ID, TXN, Op.WRITE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("InitProducerId idempotent", 2, lambda: init_producer_id.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000),
          [(RT.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("OffsetForLeaderEpoch", 3, lambda: offset_for_leader_epoch.OffsetForLeaderEpochRequest(topics=[
        offset_for_leader_epoch.OffsetForLeaderTopic(topic=TOPIC, partitions=[
            offset_for_leader_epoch.OffsetForLeaderPartition(partition=0, leader_epoch=0)])]),
          [(RT.TOPIC, TOPIC, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          _topic_entry("topics", "topic")),
    Probe("DescribeConfigs", 1, lambda: describe_configs.DescribeConfigsRequest(resources=[
        describe_configs.DescribeConfigsResource(resource_type=2, resource_name=TOPIC, configuration_keys=None)]),
          [(RT.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          lambda r: r.results[0].error_code),
    Probe("DescribeConfigs broker", 1, lambda: describe_configs.DescribeConfigsRequest(resources=[
        describe_configs.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.results[0].error_code),
    Probe("AlterConfigs", 1, lambda: alter_configs.AlterConfigsRequest(resources=[
        alter_configs.AlterConfigsResource(resource_type=2, resource_name=TOPIC, configs=[
            alter_configs.AlterableConfig(name="retention.ms", value="1000")])], validate_only=True),
          [(RT.TOPIC, TOPIC, Op.ALTER_CONFIGS)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          lambda r: r.responses[0].error_code),
    Probe("IncrementalAlterConfigs broker", 0, lambda: incremental_alter_configs.IncrementalAlterConfigsRequest(
        resources=[incremental_alter_configs.AlterConfigsResource(resource_type=4, resource_name="1", configs=[
            incremental_alter_configs.AlterableConfig(name="log.retention.ms", config_operation=0,
                                                      value="100000")])],
        validate_only=True),
          [(RT.CLUSTER, CLUSTER_NAME, Op.ALTER_CONFIGS)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.responses[0].error_code),
    Probe("DescribeLogDirs", 3, lambda: describe_log_dirs.DescribeLogDirsRequest(topics=None),
          [(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("CreateAcls", 1, lambda: create_acls.CreateAclsRequest(creations=[create_acls.AclCreation(
        resource_type=2, resource_name="x", resource_pattern_type=3, principal="User:bob", host="*", operation=3,
        permission_type=3)]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.results[0].error_code),
    Probe("DescribeAcls", 1, lambda: describe_acls.DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1),
          [(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("DeleteAcls", 1, lambda: delete_acls.DeleteAclsRequest(filters=[delete_acls.DeleteAclsFilter(
        resource_type_filter=2, resource_name_filter="x", pattern_type_filter=3, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.filter_results[0].error_code),
    # issue 15: the cluster admin APIs
    Probe("DescribeTopicPartitions", 0, lambda: describe_topic_partitions.DescribeTopicPartitionsRequest(topics=[
        describe_topic_partitions.TopicRequest(name=TOPIC)]),
          [(RT.TOPIC, TOPIC, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          lambda r: next(t.error_code for t in r.topics if t.name == TOPIC)),
    Probe("ElectLeaders", 2, lambda: elect_leaders.ElectLeadersRequest(election_type=0, topic_partitions=[
        elect_leaders.TopicPartitions(topic=TOPIC, partitions=[0])]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.replica_election_results[0].partition_result[0].error_code),
    Probe("AlterReplicaLogDirs", 2, lambda: alter_replica_log_dirs.AlterReplicaLogDirsRequest(dirs=[
        alter_replica_log_dirs.AlterReplicaLogDir(path="/nowhere", topics=[
            alter_replica_log_dirs.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0])])]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.results[0].partitions[0].error_code),
    Probe("AlterPartitionReassignments", 1, lambda: alter_partition_reassignments.AlterPartitionReassignmentsRequest(
        topics=[alter_partition_reassignments.ReassignableTopic(name=TOPIC, partitions=[
            alter_partition_reassignments.ReassignablePartition(partition_index=0, replicas=[1])])]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("ListPartitionReassignments", 0,
          lambda: list_partition_reassignments.ListPartitionReassignmentsRequest(topics=None),
          [(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("DescribeQuorum", 2, lambda: describe_quorum.DescribeQuorumRequest(topics=[
        describe_quorum.DescribeQuorumRequestTopicData(topic_name="__cluster_metadata", partitions=[
            describe_quorum.DescribeQuorumRequestPartitionData(partition_index=0)])]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("ListConfigResources", 1, lambda: list_config_resources.ListConfigResourcesRequest(resource_types=[]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("DescribeConfigs broker logger", 4, lambda: describe_configs.DescribeConfigsRequest(resources=[
        describe_configs.DescribeConfigsResource(resource_type=8, resource_name="1", configuration_keys=None)]),
          [(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.results[0].error_code),
    Probe("IncrementalAlterConfigs broker logger", 1, lambda: incremental_alter_configs.IncrementalAlterConfigsRequest(
        resources=[incremental_alter_configs.AlterConfigsResource(resource_type=8, resource_name="1", configs=[
            incremental_alter_configs.AlterableConfig(name="root", config_operation=0, value="INFO")])],
        validate_only=True),
          [(RT.CLUSTER, CLUSTER_NAME, Op.ALTER_CONFIGS)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.responses[0].error_code),
    Probe("IncrementalAlterConfigs client metrics", 1,
          lambda: incremental_alter_configs.IncrementalAlterConfigsRequest(
              resources=[incremental_alter_configs.AlterConfigsResource(resource_type=16, resource_name="subs", configs=[
                  incremental_alter_configs.AlterableConfig(name="metrics", config_operation=0, value="*")])],
              validate_only=True),
          [(RT.CLUSTER, CLUSTER_NAME, Op.ALTER_CONFIGS)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
          lambda r: r.responses[0].error_code),
    # issue 15: the consumer group protocol (KIP-848)
    Probe("ConsumerGroupHeartbeat", 1, lambda: consumer_group_heartbeat.ConsumerGroupHeartbeatRequest(
        group_id=GROUP, member_id="m", member_epoch=0, rebalance_timeout_ms=30000, subscribed_topic_names=[TOPIC],
        topic_partitions=[]),
          [(RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("ConsumerGroupHeartbeat(topic)", 1, lambda: consumer_group_heartbeat.ConsumerGroupHeartbeatRequest(
        group_id=GROUP, member_id="m", member_epoch=0, rebalance_timeout_ms=30000, subscribed_topic_names=[TOPIC],
        topic_partitions=[]),
          [(RT.TOPIC, TOPIC, Op.DESCRIBE), (RT.GROUP, GROUP, Op.READ)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("ConsumerGroupDescribe", 1, lambda: consumer_group_describe.ConsumerGroupDescribeRequest(
        group_ids=[GROUP]),
          [(RT.GROUP, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
          lambda r: r.groups[0].error_code),
    # issue 32: streams groups (KIP-1071)
    Probe("StreamsGroupHeartbeat", 0, lambda: _streams_join(),
          [(RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("StreamsGroupHeartbeat(topic)", 0, lambda: _streams_join(),
          [(RT.TOPIC, TOPIC, Op.DESCRIBE), (RT.GROUP, GROUP, Op.READ)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("StreamsGroupDescribe", 0, lambda: streams_group_describe.StreamsGroupDescribeRequest(
        group_ids=[GROUP]),
          [(RT.GROUP, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
          lambda r: r.groups[0].error_code),
    # issue 32: share groups (KIP-932)
    Probe("ShareGroupHeartbeat", 1, lambda: share_group_heartbeat.ShareGroupHeartbeatRequest(
        group_id=GROUP, member_id="m", member_epoch=0, subscribed_topic_names=[TOPIC]),
          [(RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("ShareGroupHeartbeat(topic)", 1, lambda: share_group_heartbeat.ShareGroupHeartbeatRequest(
        group_id=GROUP, member_id="m", member_epoch=0, subscribed_topic_names=[TOPIC]),
          [(RT.TOPIC, TOPIC, Op.DESCRIBE), (RT.GROUP, GROUP, Op.READ)], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          lambda r: r.error_code),
    Probe("ShareGroupDescribe", 1, lambda: share_group_describe.ShareGroupDescribeRequest(group_ids=[GROUP]),
          [(RT.GROUP, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED,
          lambda r: r.groups[0].error_code),
    Probe("ShareFetch", 1, lambda: share_fetch.ShareFetchRequest(
        group_id=GROUP, member_id="m", share_session_epoch=0, max_records=10, batch_size=10),
          [(RT.GROUP, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("ShareAcknowledge", 1, lambda: share_acknowledge.ShareAcknowledgeRequest(
        group_id=GROUP, member_id="m", share_session_epoch=1),
          [(RT.GROUP, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("DescribeShareGroupOffsets", 1, lambda: describe_share_group_offsets.DescribeShareGroupOffsetsRequest(
        groups=[describe_share_group_offsets.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=None)]),
          [(RT.GROUP, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.groups[0].error_code),
    Probe("AlterShareGroupOffsets", 0, lambda: alter_share_group_offsets.AlterShareGroupOffsetsRequest(
        group_id=GROUP, topics=[]),
          [(RT.GROUP, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    Probe("DeleteShareGroupOffsets", 0, lambda: delete_share_group_offsets.DeleteShareGroupOffsetsRequest(
        group_id=GROUP, topics=[]),
          [(RT.GROUP, GROUP, Op.DELETE)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
    # KIP-1331: refused UNSUPPORTED_VERSION (no description plugin) once READ on the group is granted
    Probe("StreamsGroupTopologyDescriptionUpdate", 0,
          lambda: streams_group_topology_description_update.StreamsGroupTopologyDescriptionUpdateRequest(
              group_id=GROUP, member_id="m", topology_epoch=0),
          [(RT.GROUP, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED, lambda r: r.error_code),
]

def _streams_join() -> Any:
    """A streams member's join whose topology reads TOPIC (and names no internal topic to create)."""
    h = streams_group_heartbeat
    return h.StreamsGroupHeartbeatRequest(
        group_id=GROUP, member_id="m", member_epoch=0, rebalance_timeout_ms=30000, process_id="p",
        topology=h.Topology(epoch=0, subtopologies=[h.Subtopology(
            subtopology_id="0", source_topics=[TOPIC], source_topic_regex=[], state_changelog_topics=[],
            repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])]),
        active_tasks=[], standby_tasks=[], warmup_tasks=[])


CASES = ("allowed", "denied", "deny_over_allow", "prefixed", "super_user")


def _bindings(probe: Probe, case: str) -> list[AclBinding]:
    (rtype, name, op), rest = probe.needs[0], probe.needs[1:]
    others = [acl(t, n, o) for t, n, o in rest]
    if case == "denied":
        return others
    if case == "deny_over_allow":
        return [*others, acl(rtype, name, op), acl(rtype, name, op, Perm.DENY)]
    if case == "prefixed" and rtype != RT.CLUSTER:
        return [*others, acl(rtype, name[:3], op, pattern=PT.PREFIXED)]
    if case == "super_user":
        return []
    return [*others, acl(rtype, name, op)]


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.name)
async def test_acl_matrix(secured: BrokerApp, probe: Probe) -> None:
    secured.state.topics.create(TOPIC, 1, 1, {})
    for case in CASES:
        if secured.state.topics.get(TOPIC) is None:
            secured.state.topics.create(TOPIC, 1, 1, {})  # DeleteTopics took it
        grant(secured, *_bindings(probe, case))
        client = await connect_as(secured, ADMIN if case == "super_user" else ALICE)
        try:
            response = await client.call(probe.request(), probe.version)
        finally:
            client.close()
        code = probe.code(response)
        if case in ("denied", "deny_over_allow"):
            assert code == probe.denial, f"{probe.name} {case}: {ErrorCode(code).name}"
        else:
            assert code != probe.denial, f"{probe.name} {case}: {ErrorCode(code).name}"
            assert code not in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), f"{probe.name} {case}"


def test_the_matrix_covers_every_served_api() -> None:
    from pybroker.broker.dispatch import load_handlers
    from pybroker.broker.security.authorization import rules, unchecked

    served = set(load_handlers())
    RULES, UNCHECKED = rules(), unchecked()
    probed = {int(type(p.request()).API_KEY) for p in PROBES}  # type: ignore[arg-type]
    assert served - set(RULES) <= set(UNCHECKED), "an API without an authorization rule"
    # only version discovery, authentication and a client's own telemetry need no permission
    assert {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                         ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY} == UNCHECKED
    # ListGroups and ListTransactions filter (their own tests below); the APIs other parts of issue 12 add are
    # probed below too
    assert served - probed - {ApiKey.LIST_GROUPS, ApiKey.LIST_TRANSACTIONS} - set(UNCHECKED) <= {ApiKey.DESCRIBE_CLUSTER, 48, 49, 50, 51}
