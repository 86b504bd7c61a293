"""A fetch's per-partition answers, built positionally with shared default tagged structs (a fetch answers
up to 1,024 partitions, and a compiled message's keyword arguments cost four times its construction): each
field lands where Kafka's answer has it, for data, errors and read_committed alike, and nothing changes
the shared structs."""

from __future__ import annotations

import time

from pybroker.broker.handlers import fetch as fetch_handler
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.fetch import (
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    LeaderIdAndEpoch,
    SnapshotId,
)
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.batch import iter_batches
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient


async def _fetch(client: RawClient, isolation: int, asks: list[tuple[str, int, int]]) -> list[object]:
    topics: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset in asks:
        topics.setdefault(topic, []).append(FetchPartition(partition=partition, fetch_offset=offset,
                                                           partition_max_bytes=1 << 20))
    request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
                           topics=[FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()])
    response = await client.call(request, 12)
    return [p for t in response.responses for p in t.partitions]


async def test_each_answer_has_its_own_fields_and_the_shared_structs_stay_default(client: RawClient) -> None:
    create = CreateTopicsRequest(topics=[CreatableTopic(name="fa", num_partitions=2, replication_factor=1)])
    assert (await client.call(create, 7)).topics[0].error_code == 0
    batch = build_batch([Record(i, 0, None, b"v%d" % i) for i in range(3)], base_timestamp=int(time.time() * 1000))
    produce = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(name="fa", partition_data=[
        PartitionProduceData(index=0, records=batch)])])
    assert (await client.call(produce, 9)).responses[0].partition_responses[0].error_code == 0

    for isolation, empty_aborted in ((0, None), (1, [])):
        data, caught_up, out_of_range, unknown = await _fetch(
            client, isolation, [("fa", 0, 0), ("fa", 1, 0), ("fa", 0, 99), ("fa", 7, 0)])
        assert (data.partition_index, data.error_code, data.high_watermark, data.last_stable_offset,
                data.log_start_offset, data.aborted_transactions) == (0, 0, 3, 3, 0, empty_aborted)
        assert [h.base_offset for _, h in iter_batches(data.records)] == [0]
        assert (caught_up.partition_index, caught_up.error_code, caught_up.high_watermark,
                caught_up.log_start_offset, len(caught_up.records or b"")) == (1, 0, 0, 0, 0)
        assert (out_of_range.partition_index, out_of_range.error_code, out_of_range.high_watermark,
                out_of_range.aborted_transactions) == (0, 1, -1, empty_aborted)  # OFFSET_OUT_OF_RANGE
        assert (unknown.partition_index, unknown.error_code, unknown.high_watermark, unknown.last_stable_offset,
                unknown.log_start_offset, unknown.aborted_transactions) == (7, 3, -1, -1, -1, [])
        for answer in (data, caught_up, out_of_range, unknown):
            assert answer.preferred_read_replica == -1
    shared = (fetch_handler._NO_DIVERGENCE, fetch_handler._NO_LEADER, fetch_handler._NO_SNAPSHOT)
    assert shared == (EpochEndOffset(), LeaderIdAndEpoch(), SnapshotId())
