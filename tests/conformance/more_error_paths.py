"""More error paths, across the admin APIs: groups that cannot be deleted, groups and transactions nobody
made, elections of unknown partitions, producers of unknown partitions, timestamps no log has, and the
consumer group protocol (KIP-848) with members nobody knows. Same shape as error_paths.py.
"""

from __future__ import annotations

from pybroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from pybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from pybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from pybroker.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from pybroker.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pybroker.protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from pybroker.protocol.messages.list_transactions import ListTransactionsRequest
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from tests.conformance import scenarios as s
from tests.conformance.error_paths import topic_of
from tests.conformance.group_errors import joined
from tests.conformance.registry import scenario
from tests.conformance.side import Side

FAMILY = "more_error_paths"


@scenario("more/delete-groups", FAMILY, "DeleteGroups of an active group and of an unknown group",
          known="DeleteGroups: the same two answers (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND) in the other order: Kafka "
                "4.4 lists the unknown group first, pybroker in the request's order (clients match them by group id)")
async def _delete_groups(side: Side) -> None:
    await joined(side)
    await side.call(DeleteGroupsRequest(groups_names=[side.name("g"), side.name("none")]), 2)


@scenario("more/describe-groups-unknown", FAMILY, "DescribeGroups v5 of a group nobody made, and of an active one")
async def _describe_groups(side: Side) -> None:
    await joined(side)
    await side.call(DescribeGroupsRequest(groups=[side.name("none"), side.name("g")]), 5)


@scenario("more/offset-commit-simple-consumer", FAMILY, "OffsetCommit v8 without a group generation (a "
          "standalone consumer) to an existing topic, an unknown partition and an unknown topic")
async def _commit_standalone(side: Side) -> None:
    name = await topic_of(side)
    await side.call(OffsetCommitRequest(group_id=side.name("g"), topics=[
        OffsetCommitRequestTopic(name=name, partitions=[OffsetCommitRequestPartition(partition_index=0,
                                                                                     committed_offset=2),
                                                        OffsetCommitRequestPartition(partition_index=9)]),
        OffsetCommitRequestTopic(name=side.name("none"), partitions=[OffsetCommitRequestPartition()])]), 8)


@scenario("more/transactions-nobody-made", FAMILY, "DescribeTransactions of an unknown transactional id, and "
          "ListTransactions filtered by a state")
async def _transactions(side: Side) -> None:
    await side.call(DescribeTransactionsRequest(transactional_ids=[side.name("tx")]), 0)
    await side.call(ListTransactionsRequest(state_filters=["Ongoing"], transactional_id_pattern=None), 1)


@scenario("more/elect-leaders", FAMILY, "ElectLeaders (preferred) of a partition that has its leader and of an "
          "unknown one")
async def _elect(side: Side) -> None:
    name = await topic_of(side)
    await side.call(ElectLeadersRequest(election_type=0, topic_partitions=[
        TopicPartitions(topic=name, partitions=[0, 4])], timeout_ms=5000), 2)


@scenario("more/describe-producers", FAMILY, "DescribeProducers of a partition with one idempotent-less batch, "
          "and of an unknown partition")
async def _producers(side: Side) -> None:
    name = await topic_of(side, records=True)
    await side.call(DescribeProducersRequest(topics=[TopicRequest(name=name, partition_indexes=[0, 3])]), 0)


@scenario("more/list-offsets-odd-timestamps", FAMILY, "ListOffsets v7 with timestamps no log has: -5, and the "
          "earliest-local (-4) of a log of three")
async def _odd_timestamps(side: Side) -> None:
    name = await topic_of(side, records=True)
    for timestamp in (-5, -4):
        await side.call(s.list_offsets(name, timestamp), 7)


@scenario("more/consumer-group-heartbeat-unknown-member", FAMILY, "ConsumerGroupHeartbeat v0 of a member id "
          "nobody joined with, and with a negative epoch")
async def _cg_heartbeat(side: Side) -> None:
    await side.call(ConsumerGroupHeartbeatRequest(group_id=side.name("g"), member_id="AAAAAAAAAAAAAAAAAAAAAA",
                                                  member_epoch=3, rebalance_timeout_ms=10_000,
                                                  subscribed_topic_names=None), 0)
    await side.call(ConsumerGroupHeartbeatRequest(group_id=side.name("g"), member_id="AAAAAAAAAAAAAAAAAAAAAA",
                                                  member_epoch=-5, rebalance_timeout_ms=10_000,
                                                  subscribed_topic_names=None), 0)
