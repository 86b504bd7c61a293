"""The transaction admin APIs against an in-process broker: DescribeTransactions and ListTransactions read
the coordinator, DescribeProducers a partition's producer state, WriteTxnMarkers ends an open transaction."""

from __future__ import annotations

import asyncio

from pybroker.broker.app import BrokerApp
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from pybroker.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from pybroker.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.list_transactions import ListTransactionsRequest
from pybroker.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from pybroker.protocol.records.batch import iter_batches
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient

TOPIC = "txn-admin"


async def _init(client: RawClient, txn_id: str) -> tuple[int, int]:
    for _ in range(200):  # the first transactional id creates and loads __transaction_state
        init = await client.call(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=30_000), 4)
        if init.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                   ErrorCode.NOT_COORDINATOR):
            break
        await asyncio.sleep(0.02)
    assert init.error_code == 0, ErrorCode(init.error_code).name
    return init.producer_id, init.producer_epoch


async def _add(client: RawClient, txn_id: str, pid: int, epoch: int, partitions: list[int]) -> None:
    added = await client.call(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=TOPIC, partitions=partitions)]), 3)
    assert all(p.partition_error_code == 0 for t in added.results_by_topic_v3_and_below for p in t.results_by_partition)


async def test_describe_and_list_follow_the_coordinator(app: BrokerApp, client: RawClient) -> None:
    app.state.topics.create(TOPIC, 2, 1, {})
    missing = await client.call(DescribeTransactionsRequest(transactional_ids=["nobody"]), 0)
    assert missing.transaction_states[0].error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

    pid_a, epoch_a = await _init(client, "tx-a")
    pid_b, _ = await _init(client, "other-b")
    await _add(client, "tx-a", pid_a, epoch_a, [1, 0])
    described = await client.call(DescribeTransactionsRequest(transactional_ids=["tx-a", "other-b", "tx-a"]), 0)
    by_id = {t.transactional_id: t for t in described.transaction_states}
    assert len(described.transaction_states) == 2  # named twice, described once
    a, b = by_id["tx-a"], by_id["other-b"]
    assert (a.error_code, a.transaction_state, a.producer_id, a.producer_epoch) == (0, "Ongoing", pid_a, epoch_a)
    assert a.transaction_timeout_ms == 30_000 and a.transaction_start_time_ms > 0
    assert [(t.topic, t.partitions) for t in a.topics] == [(TOPIC, [0, 1])]
    assert (b.transaction_state, b.topics, b.transaction_start_time_ms) == ("Empty", [], -1)

    async def listed(request: ListTransactionsRequest, version: int) -> list[tuple[str, int, str]]:
        response = await client.call(request, version)
        assert response.error_code == 0
        return sorted((t.transactional_id, t.producer_id, t.transaction_state) for t in response.transaction_states)

    assert await listed(ListTransactionsRequest(), 0) == sorted([("tx-a", pid_a, "Ongoing"),
                                                                 ("other-b", pid_b, "Empty")])
    assert await listed(ListTransactionsRequest(state_filters=["Ongoing"]), 0) == [("tx-a", pid_a, "Ongoing")]
    assert await listed(ListTransactionsRequest(producer_id_filters=[pid_b]), 0) == [("other-b", pid_b, "Empty")]
    # Kafka's rule (now - start time > duration) keeps an id that never began a transaction (start -1)
    assert await listed(ListTransactionsRequest(duration_filter=3_600_000), 1) == [("other-b", pid_b, "Empty")]
    assert await listed(ListTransactionsRequest(transactional_id_pattern="tx-.*"), 2) == [("tx-a", pid_a, "Ongoing")]
    assert await listed(ListTransactionsRequest(transactional_id_pattern="tx"), 2) == []  # the whole id must match
    assert len(await listed(ListTransactionsRequest(transactional_id_pattern=""), 2)) == 2  # empty: all

    unknown = await client.call(ListTransactionsRequest(state_filters=["Ongoing", "Sleeping", "ongoing"]), 0)
    assert unknown.error_code == 0 and unknown.unknown_state_filters == ["Sleeping", "ongoing"]
    assert [t.transactional_id for t in unknown.transaction_states] == ["tx-a"]
    bad = await client.call(ListTransactionsRequest(transactional_id_pattern="(a+)+\\1"), 2)
    assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION and bad.transaction_states == []


def _append_open_transaction(app: BrokerApp, pid: int, epoch: int, partition: int) -> int:
    """A transactional batch straight into the log (the produce path's business is tested elsewhere)."""
    log = app.state.logs.get_log(TOPIC, partition)
    assert log is not None
    batch = bytearray(build_batch([Record(0, 0, b"k", b"v")], base_timestamp=app.state.clock_ms(),
                                  producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True))
    return log.append(batch, list(iter_batches(batch)), now_ms=app.state.clock_ms()).base_offset


async def test_describe_producers_and_an_abort_marker(app: BrokerApp, client: RawClient) -> None:
    app.state.topics.create(TOPIC, 2, 1, {})
    offset = _append_open_transaction(app, 42, 3, 0)
    log = app.state.logs.get_log(TOPIC, 0)
    assert log is not None and log.last_stable_offset == offset

    described = await client.call(DescribeProducersRequest(topics=[
        TopicRequest(name=TOPIC, partition_indexes=[0, 1, 0, 7]), TopicRequest(name=TOPIC, partition_indexes=[1]),
        TopicRequest(name="no-such-topic", partition_indexes=[0])]), 0)
    assert [t.name for t in described.topics] == [TOPIC, "no-such-topic"]  # each topic and partition once
    parts = {p.partition_index: p for p in described.topics[0].partitions}
    assert sorted(parts) == [0, 1, 7]
    [producer] = parts[0].active_producers
    assert (producer.producer_id, producer.producer_epoch, producer.current_txn_start_offset) == (42, 3, offset)
    assert producer.last_sequence == 0 and producer.coordinator_epoch == -1
    assert parts[1].error_code == 0 and parts[1].active_producers == []
    assert parts[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert described.topics[1].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def marker(epoch: int, partitions: list[int], topic: str = TOPIC) -> WriteTxnMarkersRequest:
        return WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=42, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
            topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=partitions)])])

    stale = await client.call(marker(2, [0]), 1)
    assert stale.markers[0].topics[0].partitions[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    written = await client.call(marker(3, [0, 0, 9]), 2)
    codes = {p.partition_index: p.error_code for p in written.markers[0].topics[0].partitions}
    assert codes == {0: 0, 9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert log.last_stable_offset == log.high_watermark == offset + 2  # the batch and its marker
    assert log.aborted_transactions(0, log.high_watermark) == [(42, offset)]
    after = await client.call(DescribeProducersRequest(topics=[TopicRequest(name=TOPIC, partition_indexes=[0])]), 0)
    [producer] = after.topics[0].partitions[0].active_producers
    assert producer.current_txn_start_offset == -1 and producer.coordinator_epoch == 0


async def test_requests_cannot_multiply_the_work(app: BrokerApp, client: RawClient) -> None:
    """A hostile request repeating names gets one answer per distinct name, and a WriteTxnMarkers naming more
    partitions than MAX_PARTITIONS gets INVALID_REQUEST for the rest instead of thousands of fsyncs."""
    from pybroker.broker.handlers.write_txn_markers import MAX_PARTITIONS

    described = await client.call(DescribeTransactionsRequest(transactional_ids=["same"] * 50_000), 0)
    assert len(described.transaction_states) == 1
    producers = await client.call(DescribeProducersRequest(topics=[
        TopicRequest(name="t", partition_indexes=[0] * 10_000) for _ in range(5)]), 0)
    assert [len(t.partitions) for t in producers.topics] == [1]

    many = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name="nowhere", partition_indexes=list(range(MAX_PARTITIONS + 5)))])])
    answer = await client.call(many, 1, timeout=30)
    codes = [p.error_code for p in answer.markers[0].topics[0].partitions]
    assert codes[:MAX_PARTITIONS] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * MAX_PARTITIONS
    assert codes[MAX_PARTITIONS:] == [ErrorCode.INVALID_REQUEST] * 5
