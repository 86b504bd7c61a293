"""Error paths of transactions: state errors, fencing, unknown ids, invalid timeouts. Each side uses the
producer id its own broker gave (the answers compare producer ids only as present, normalize.py).
"""

from __future__ import annotations

from typing import Any

from pybroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from pybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from pybroker.protocol.messages.end_txn import EndTxnRequest
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from pybroker.protocol.records.record import Record, build_batch
from tests.conformance import scenarios as s
from tests.conformance.error_paths import topic_of
from tests.conformance.registry import scenario
from tests.conformance.side import Side

FAMILY = "transaction_errors"


async def initialized(side: Side, keep: bool = False) -> tuple[int, int]:
    request = InitProducerIdRequest(transactional_id=side.name("tx"), transaction_timeout_ms=60_000)
    answer: Any = await (side.call(request, 4) if keep else side.raw(request, 4))
    assert answer.error_code == 0, answer
    return answer.producer_id, answer.producer_epoch


def add_partitions(side: Side, pid: int, epoch: int, name: str) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(v3_and_below_transactional_id=side.name("tx"), v3_and_below_producer_id=pid,
                                     v3_and_below_producer_epoch=epoch,
                                     v3_and_below_topics=[AddPartitionsToTxnTopic(name=name, partitions=[0])])


@scenario("transactions/init-invalid-timeout", FAMILY, "InitProducerId with a timeout over "
          "transaction.max.timeout.ms, and of zero")
async def _invalid_timeout(side: Side) -> None:
    for timeout in (1_000_000_000, 0):
        await side.call(InitProducerIdRequest(transactional_id=side.name("tx"), transaction_timeout_ms=timeout), 4)


@scenario("transactions/init-twice-bumps-the-epoch", FAMILY, "InitProducerId twice for one transactional id")
async def _init_twice(side: Side) -> None:
    await initialized(side, keep=True)
    await initialized(side, keep=True)


@scenario("transactions/end-without-a-transaction", FAMILY, "EndTxn commit and abort with no transaction "
          "ongoing")
async def _end_empty(side: Side) -> None:
    pid, epoch = await initialized(side)
    for committed in (True, False):
        await side.call(EndTxnRequest(transactional_id=side.name("tx"), producer_id=pid, producer_epoch=epoch,
                                      committed=committed), 3)


@scenario("transactions/end-unknown-transactional-id", FAMILY, "EndTxn of a transactional id never initialized")
async def _end_unknown(side: Side) -> None:
    await side.call(EndTxnRequest(transactional_id=side.name("never"), producer_id=1, producer_epoch=0,
                                  committed=True), 3)


@scenario("transactions/fenced-by-a-newer-epoch", FAMILY, "AddPartitionsToTxn and EndTxn with the epoch a "
          "second InitProducerId fenced")
async def _fenced(side: Side) -> None:
    name = await topic_of(side)
    pid, epoch = await initialized(side)
    await initialized(side)
    await side.call(add_partitions(side, pid, epoch, name), 3)
    await side.call(EndTxnRequest(transactional_id=side.name("tx"), producer_id=pid, producer_epoch=epoch,
                                  committed=True), 3)


@scenario("transactions/wrong-producer-id", FAMILY, "AddPartitionsToTxn and AddOffsetsToTxn with a producer id "
          "that is not the transactional id's")
async def _wrong_pid(side: Side) -> None:
    name = await topic_of(side)
    pid, epoch = await initialized(side)
    await side.call(add_partitions(side, pid + 1, epoch, name), 3)
    await side.call(AddOffsetsToTxnRequest(transactional_id=side.name("tx"), producer_id=pid + 1,
                                           producer_epoch=epoch, group_id=side.name("g")), 3)


@scenario("transactions/add-unknown-partition", FAMILY, "AddPartitionsToTxn of an unknown topic")
async def _add_unknown(side: Side) -> None:
    pid, epoch = await initialized(side)
    await side.call(add_partitions(side, pid, epoch, side.name("none")), 3)


@scenario("transactions/commit-then-abort", FAMILY, "A transaction over one partition: add, produce, commit; "
          "then EndTxn abort with nothing ongoing")
async def _commit(side: Side) -> None:
    name = await topic_of(side)
    pid, epoch = await initialized(side)
    await side.call(add_partitions(side, pid, epoch, name), 3)
    batch = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=s.TIMESTAMP, producer_id=pid,
                        producer_epoch=epoch, base_sequence=0, is_transactional=True)
    produce = s.produce(name, data=batch)
    produce.transactional_id = side.name("tx")
    await side.call(produce, 9)
    await side.call(EndTxnRequest(transactional_id=side.name("tx"), producer_id=pid, producer_epoch=epoch,
                                  committed=True), 3)


@scenario("transactions/produce-without-add-partitions", FAMILY, "A transactional Produce to a partition not "
          "added to the transaction (the second try: Kafka's first may still be NOT_LEADER_OR_FOLLOWER while its "
          "broker first reaches the transaction coordinator to verify)")
async def _produce_unadded(side: Side) -> None:
    name = await topic_of(side)
    pid, epoch = await initialized(side)
    batch = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=s.TIMESTAMP, producer_id=pid,
                        producer_epoch=epoch, base_sequence=0, is_transactional=True)
    produce = s.produce(name, data=batch)
    produce.transactional_id = side.name("tx")
    await side.raw(produce, 9)
    await side.call(produce, 9)


@scenario("transactions/txn-offset-commit-without-add-offsets", FAMILY, "TxnOffsetCommit before AddOffsetsToTxn")
async def _txn_commit_unadded(side: Side) -> None:
    name = await topic_of(side)
    pid, epoch = await initialized(side)
    await side.call(TxnOffsetCommitRequest(
        transactional_id=side.name("tx"), group_id=side.name("g"), producer_id=pid, producer_epoch=epoch,
        topics=[TxnOffsetCommitRequestTopic(name=name, partitions=[TxnOffsetCommitRequestPartition(0, 1)])]), 3)
