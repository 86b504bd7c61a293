"""The transaction APIs through the in-process broker: every version's wire shape, and the errors each
refusal answers.

The coordinator's rules are tested on their own (test_txn_coordinator); here whole transactions run
through FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, Produce and EndTxn, once
per request version.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from pybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.end_txn import EndTxnRequest
from pybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient

TOPIC = "t"
E = ErrorCode
_ids = itertools.count()


def txn_id() -> str:
    return f"txn-{next(_ids)}"


async def _topic(client: RawClient, partitions: int = 2) -> None:
    await client.call(CreateTopicsRequest(topics=[CreatableTopic(name=TOPIC, num_partitions=partitions,
                                                                 replication_factor=1)], timeout_ms=5000), 4)


async def _init(client: RawClient, tid: str, version: int = 4, **kw: object) -> tuple[int, int]:
    response = await client.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000,
                                                       **kw), version)  # type: ignore[arg-type]
    assert response.error_code == E.NONE
    return response.producer_id, response.producer_epoch


def _add(tid: str, pid: int, epoch: int, parts: dict[str, list[int]]) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in parts.items()])


def _codes(response: object) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}  # type: ignore[attr-defined]


def _produce(tid: str, pid: int, epoch: int, partition: int = 0, seq: int = 0) -> ProduceRequest:
    batch = build_batch([Record(0, 0, b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=True)
    return ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=TOPIC, partition_data=[PartitionProduceData(index=partition, records=batch)])])


def _produce_code(response: object) -> int:
    return response.responses[0].partition_responses[0].error_code  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("version", range(0, 7))
async def test_find_coordinator_for_a_transactional_id(client: RawClient, app: BrokerApp, version: int) -> None:
    if version >= 4:
        request = FindCoordinatorRequest(key_type=1, coordinator_keys=["x", ""])
    else:
        request = FindCoordinatorRequest(key="x", key_type=1)
    if version == 0:
        return  # v0 has no key type: it only finds groups
    response = await client.call(request, version)
    if version >= 4:
        assert [c.error_code for c in response.coordinators] == [E.NONE, E.INVALID_REQUEST]
        assert response.coordinators[0].port == app.bound_ports[0]
    else:
        assert (response.error_code, response.node_id) == (E.NONE, app.state.node_id)
    assert app.state.transactions.state_topic.exists()


@pytest.mark.parametrize("version", range(0, 7))
async def test_init_producer_id_every_version_fences_the_previous_producer(client: RawClient,
                                                                         version: int) -> None:
    tid = txn_id()
    pid, epoch = await _init(client, tid, version)
    assert epoch == 0
    pid2, epoch2 = await _init(client, tid, version)
    assert (pid2, epoch2) == (pid, 1)
    too_long = await client.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=10**9),
                                 version)
    assert too_long.error_code == E.INVALID_TRANSACTION_TIMEOUT


@pytest.mark.parametrize("version", range(0, 6))
async def test_a_committed_transaction_every_end_txn_version(client: RawClient, app: BrokerApp,
                                                            version: int) -> None:
    await _topic(client)
    tid = txn_id()
    pid, epoch = await _init(client, tid)
    add_version = min(version, 3)
    added = await client.call(_add(tid, pid, epoch, {TOPIC: [0, 1]}), add_version)
    assert set(_codes(added).values()) == {E.NONE}
    assert _produce_code(await client.call(_produce(tid, pid, epoch), 9)) == E.NONE
    offsets = await client.call(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                       group_id="g"), min(version, 4))
    assert offsets.error_code == E.NONE
    ended = await client.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                            committed=True), version)
    assert ended.error_code == E.NONE
    if version >= 5:
        assert (ended.producer_id, ended.producer_epoch) == (pid, epoch + 1)
    await app.state.transactions.coordinator.wait_idle()
    meta = app.state.transactions.get(tid)
    assert meta is not None and meta.state.value == "CompleteCommit"
    log = app.state.logs.get_log(TOPIC, 0)
    assert log is not None and log.last_stable_offset == log.high_watermark == 2  # the record and its marker


async def test_unknown_partitions_fail_alone_and_the_rest_are_not_attempted(client: RawClient) -> None:
    await _topic(client)
    tid = txn_id()
    pid, epoch = await _init(client, tid)
    response = await client.call(_add(tid, pid, epoch, {TOPIC: [0, 7], "missing": [0]}), 3)
    assert _codes(response) == {(TOPIC, 0): E.OPERATION_NOT_ATTEMPTED, (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                                ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}


async def test_older_versions_hear_invalid_producer_epoch_for_fenced(client: RawClient) -> None:
    await _topic(client)
    tid = txn_id()
    pid, _ = await _init(client, tid)
    await _init(client, tid)
    old = await client.call(_add(tid, pid, 0, {TOPIC: [0]}), 1)
    assert set(_codes(old).values()) == {E.INVALID_PRODUCER_EPOCH}
    new = await client.call(_add(tid, pid, 0, {TOPIC: [0]}), 2)
    assert set(_codes(new).values()) == {E.PRODUCER_FENCED}
    ended = await client.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=0,
                                            committed=True), 1)
    assert ended.error_code == E.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize(("version", "code"), [(9, E.INVALID_TXN_STATE), (11, E.TRANSACTION_ABORTABLE),
                                               (12, E.NONE)])
async def test_produce_to_a_partition_not_in_the_transaction(client: RawClient, app: BrokerApp, version: int,
                                                             code: int) -> None:
    await _topic(client)
    tid = txn_id()
    pid, epoch = await _init(client, tid)
    assert _produce_code(await client.call(_produce(tid, pid, epoch), version)) == code
    if version == 12:  # transactions v2: the partition was added
        assert app.state.transactions.get(tid).partitions == {(TOPIC, 0)}  # type: ignore[union-attr]


async def test_a_fenced_producers_batch_is_refused(client: RawClient) -> None:
    await _topic(client)
    tid = txn_id()
    pid, epoch = await _init(client, tid)
    await client.call(_add(tid, pid, epoch, {TOPIC: [0]}), 3)
    # a new producer: CONCURRENT_TRANSACTIONS while the old one's transaction is aborted, epoch fenced
    fence = await client.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000), 4)
    assert fence.error_code == E.CONCURRENT_TRANSACTIONS
    assert _produce_code(await client.call(_produce(tid, pid, epoch), 9)) == E.INVALID_PRODUCER_EPOCH
    assert _produce_code(await client.call(_produce(tid, pid + 100, epoch), 9)) == E.INVALID_PRODUCER_ID_MAPPING


async def test_a_transactional_batch_without_a_transactional_id_is_refused(client: RawClient) -> None:
    await _topic(client)
    request = _produce("x", 1, 0)
    request.transactional_id = None
    assert _produce_code(await client.call(request, 9)) == E.INVALID_RECORD


async def test_batched_add_partitions_and_verify_only(client: RawClient) -> None:
    await _topic(client)
    tid = txn_id()
    pid, epoch = await _init(client, tid)

    def txn(verify: bool, parts: list[int]) -> AddPartitionsToTxnTransaction:
        return AddPartitionsToTxnTransaction(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                             verify_only=verify,
                                             topics=[AddPartitionsToTxnTopic(name=TOPIC, partitions=parts)])

    verified = await client.call(AddPartitionsToTxnRequest(transactions=[txn(True, [0])]), 5)
    assert verified.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == \
        E.TRANSACTION_ABORTABLE
    verified4 = await client.call(AddPartitionsToTxnRequest(transactions=[txn(True, [0])]), 4)
    assert verified4.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == \
        E.INVALID_TXN_STATE
    added = await client.call(AddPartitionsToTxnRequest(transactions=[txn(False, [0])]), 5)
    assert added.error_code == E.NONE
    assert added.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == E.NONE
    verified = await client.call(AddPartitionsToTxnRequest(transactions=[txn(True, [0, 1])]), 5)
    codes = [p.partition_error_code for p in verified.results_by_transaction[0].topic_results[0].results_by_partition]
    assert codes == [E.NONE, E.TRANSACTION_ABORTABLE]


async def test_hostile_requests_get_clear_answers(client: RawClient, app: BrokerApp) -> None:
    await _topic(client)
    app.state.config.explicit["max.partitions.per.request"] = 3
    tid = txn_id()
    pid, epoch = await _init(client, tid)
    many = await client.call(_add(tid, pid, epoch, {TOPIC: [0, 1, 2, 3]}), 3)
    assert set(_codes(many).values()) == {E.INVALID_REQUEST}
    batched = await client.call(AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch,
        topics=[AddPartitionsToTxnTopic(name=TOPIC, partitions=[0, 1, 2, 3])])]), 5)
    assert batched.error_code == E.INVALID_REQUEST
    huge = await client.call(InitProducerIdRequest(transactional_id="x" * 40_000, transaction_timeout_ms=1000), 4)
    assert huge.error_code == E.INVALID_REQUEST
    empty = await client.call(InitProducerIdRequest(transactional_id="", transaction_timeout_ms=1000), 4)
    assert empty.error_code == E.INVALID_REQUEST
    end = await client.call(EndTxnRequest(transactional_id="", producer_id=1, producer_epoch=0, committed=True), 3)
    assert end.error_code == E.INVALID_REQUEST
    no_group = await client.call(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                        group_id=""), 3)
    assert no_group.error_code == E.INVALID_GROUP_ID
    two_pc = await client.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=1000,
                                                     enable_2pc=True), 6)
    assert two_pc.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    idempotent_2pc = await client.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                             enable_2pc=True), 6)
    assert idempotent_2pc.error_code == E.INVALID_REQUEST


async def test_keep_prepared_txn_over_the_wire(client: RawClient, app: BrokerApp) -> None:
    await _topic(client)
    app.state.transactions.coordinator.config = type(app.state.transactions.coordinator.config)(
        num_partitions=app.state.transactions.coordinator.config.num_partitions, two_phase_commit_enabled=True)
    tid = txn_id()
    pid, epoch = await _init(client, tid, 6, enable_2pc=True)
    await client.call(_add(tid, pid, epoch, {TOPIC: [0]}), 3)
    assert _produce_code(await client.call(_produce(tid, pid, epoch), 9)) == E.NONE
    resumed = await client.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000,
                                                      enable_2pc=True, keep_prepared_txn=True), 6)
    assert resumed.error_code == E.NONE
    assert (resumed.ongoing_txn_producer_id, resumed.ongoing_txn_producer_epoch) == (pid, epoch)
    ended = await client.call(EndTxnRequest(transactional_id=tid, producer_id=resumed.producer_id,
                                            producer_epoch=resumed.producer_epoch, committed=True), 4)
    assert ended.error_code == E.NONE
    await app.state.transactions.coordinator.wait_idle()
    log = app.state.logs.get_log(TOPIC, 0)
    assert log is not None and log.last_stable_offset == 2


@pytest.mark.parametrize("through", ["the service", "the service's parts"])
async def test_write_markers_answers_each_partition(client: RawClient, app: BrokerApp, through: str) -> None:
    """WriteTxnMarkers goes through the transaction service, which hands `write_markers` only its own parts
    (`TxnParts`, a `MarkerTargets`): both answer each partition."""
    from pybroker.broker.transactions.markers import write_markers

    service = app.state.transactions

    async def targets_write(*args: Any) -> dict[tuple[str, int], int]:
        if through == "the service":
            return await service.write_markers(*args)
        return await write_markers(service.parts, *args)

    await _topic(client)
    tid = txn_id()
    pid, epoch = await _init(client, tid)
    await client.call(_add(tid, pid, epoch, {TOPIC: [0]}), 3)
    assert _produce_code(await client.call(_produce(tid, pid, epoch), 9)) == E.NONE
    log = app.state.logs.get_log(TOPIC, 0)
    assert log is not None and log.last_stable_offset == 0  # the open transaction holds it back
    codes = await targets_write(pid, epoch, 0, False, [(TOPIC, 0), ("missing", 0), (TOPIC, 9)])
    assert codes == {(TOPIC, 0): E.NONE, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                     (TOPIC, 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert log.last_stable_offset == log.high_watermark == 2
    stale = await targets_write(pid, epoch - 1, 0, False, [(TOPIC, 0)])
    assert stale == {(TOPIC, 0): E.INVALID_PRODUCER_EPOCH}


async def test_metrics_count_transactional_ids_by_state(client: RawClient, app: BrokerApp) -> None:
    from pybroker.broker.metrics.collector import _transaction_figures

    await _topic(client)
    tid = txn_id()
    pid, epoch = await _init(client, tid)
    by_state, oldest = _transaction_figures(app.state)
    assert (by_state["Empty"], by_state["Ongoing"], oldest) == (1, 0, 0)
    await client.call(_add(tid, pid, epoch, {TOPIC: [0]}), 3)
    by_state, oldest = _transaction_figures(app.state)
    assert by_state["Ongoing"] == 1 and oldest >= 0


async def test_a_transactions_v2_life_over_the_wire(client: RawClient, app: BrokerApp) -> None:
    """Kafka 4 clients: no AddPartitionsToTxn, Produce v12 adds the partition, EndTxn v5 bumps the epoch."""
    await _topic(client)
    tid = txn_id()
    pid, epoch = await _init(client, tid, 5)
    seq = {0: 0, 1: 0}
    for partition in (0, 1):
        assert _produce_code(await client.call(_produce(tid, pid, epoch, partition, seq[partition]), 12)) == E.NONE
        seq[partition] += 1
    committed = await client.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                committed=True), 5)
    assert (committed.error_code, committed.producer_id, committed.producer_epoch) == (E.NONE, pid, epoch + 1)
    epoch = committed.producer_epoch
    # the next transaction starts at once, while the last one may still be writing its markers
    assert _produce_code(await client.call(_produce(tid, pid, epoch, 0, 0), 12)) == E.NONE
    # the old epoch is fenced for good
    assert _produce_code(await client.call(_produce(tid, pid, epoch - 1, 1, 5), 12)) == E.INVALID_PRODUCER_EPOCH
    aborted = await client.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                              committed=False), 5)
    assert (aborted.error_code, aborted.producer_epoch) == (E.NONE, epoch + 1)
    await app.state.transactions.coordinator.wait_idle()
    log0 = app.state.logs.get_log(TOPIC, 0)
    assert log0 is not None and log0.last_stable_offset == log0.high_watermark == 4  # 2 records, 2 markers
    assert log0.aborted_transactions(0, 4) == [(pid, 2)]


def test_the_transaction_service_is_handed_its_parts_not_the_broker_state(app: BrokerApp) -> None:
    """What the coordinator can reach is stated in one place (`TxnParts`), and it is the group service's
    narrow interface to partitions (`CoordinatorPartitions`), not the partition layer."""
    from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
    from pybroker.broker.partitions.manager import ReplicaManager
    from pybroker.broker.state import BrokerState
    from pybroker.broker.transactions.service import TxnParts

    parts = app.state.transactions.parts
    assert isinstance(parts, TxnParts)
    assert isinstance(parts.partitions, CoordinatorPartitions) and parts.partitions is app.state.groups.partitions
    assert parts.groups is app.state.groups
    assert parts.config is app.state.config and parts.clock_ms is app.state.groups.clock_ms
    assert not any(isinstance(value, ReplicaManager) for value in vars(app.state.transactions).values())
    assert not any(isinstance(value, BrokerState) for value in vars(app.state.transactions).values())
