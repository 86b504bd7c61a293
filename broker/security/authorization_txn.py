"""Authorization rules of the transaction APIs (Kafka's checks): InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, and the admin APIs DescribeTransactions, ListTransactions, DescribeProducers and
WriteTxnMarkers. Each rule answers as the others in `authorization` do: None (allowed), a response
(refused), or a merge (partly allowed). TxnOffsetCommit's rule stays with the group rules.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.security.authorization_check import (
    CLUSTER_DENIED,
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    TXN,
    TXN_DENIED,
    Check,
    Op,
    Outcome,
    appending,
    per_topic,
    split_by,
)
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_producers,
    describe_transactions,
    end_txn,
    init_producer_id,
    write_txn_markers,
)


def init_producer_id_rule(check: Check, r: init_producer_id.InitProducerIdRequest) -> Outcome:
    if r.transactional_id is not None:
        allowed, code = check.ok(Op.WRITE, TXN, r.transactional_id), TXN_DENIED
        if allowed and r.enable_2pc:
            allowed = check.ok(Op.TWO_PHASE_COMMIT, TXN, r.transactional_id)
    else:
        allowed = check.cluster(Op.IDEMPOTENT_WRITE, quiet=True) or check.may_write_some_topic()
        code = CLUSTER_DENIED
        if not allowed:
            check.cluster(Op.IDEMPOTENT_WRITE)  # logged and counted once
    return None if allowed else init_producer_id.InitProducerIdResponse(error_code=code, producer_id=-1,
                                                                        producer_epoch=-1)


# -- transactions --------------------------------------------------------------------------------------
def add_partitions_to_txn_rule(check: Check, r: add_partitions_to_txn.AddPartitionsToTxnRequest) -> Outcome:
    from pybroker.broker.handlers.add_partitions_to_txn import FIRST_BATCHED_VERSION, topic_results

    if check.version >= FIRST_BATCHED_VERSION:  # the broker-to-coordinator form
        if check.cluster(Op.CLUSTER_ACTION):
            return None
        return add_partitions_to_txn.AddPartitionsToTxnResponse(error_code=CLUSTER_DENIED,
                                                                results_by_transaction=[])

    def refuse(codes: dict[tuple[str, int], ErrorCode], rest: ErrorCode) -> Any:
        return add_partitions_to_txn.AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=topic_results(r.v3_and_below_topics, codes, rest))

    if not check.ok(Op.WRITE, TXN, r.v3_and_below_transactional_id):
        return refuse({}, TXN_DENIED)
    denied = {t.name for t in r.v3_and_below_topics if not check.ok(Op.WRITE, TOPIC, t.name)}
    if not denied:
        return None
    return refuse({(t.name, p): TOPIC_DENIED for t in r.v3_and_below_topics if t.name in denied
                   for p in t.partitions}, ErrorCode.OPERATION_NOT_ATTEMPTED)


def add_offsets_to_txn_rule(check: Check, r: add_offsets_to_txn.AddOffsetsToTxnRequest) -> Outcome:
    if not check.ok(Op.WRITE, TXN, r.transactional_id):
        return add_offsets_to_txn.AddOffsetsToTxnResponse(error_code=TXN_DENIED)
    if not check.ok(Op.READ, GROUP, r.group_id):
        return add_offsets_to_txn.AddOffsetsToTxnResponse(error_code=GROUP_DENIED)
    return None


def end_txn_rule(check: Check, r: end_txn.EndTxnRequest) -> Outcome:
    return None if check.ok(Op.WRITE, TXN, r.transactional_id) else end_txn.EndTxnResponse(error_code=TXN_DENIED)


# -- transactions: the admin APIs of KIP-664 and the coordinator-to-leader markers ---------------------------
def describe_transactions_rule(check: Check, r: describe_transactions.DescribeTransactionsRequest) -> Outcome:
    kept, denied = split_by(r.transactional_ids, lambda t: check.ok(Op.DESCRIBE, TXN, t))
    if not denied:
        return None
    r.transactional_ids = kept
    return appending("transaction_states", [describe_transactions.TransactionState(
        error_code=TXN_DENIED, transactional_id=t) for t in dict.fromkeys(denied)])


def list_transactions_rule(check: Check, r: Any) -> Outcome:
    def visible(response: Any) -> Any:
        response.transaction_states = [t for t in response.transaction_states
                                       if check.ok(Op.DESCRIBE, TXN, t.transactional_id, quiet=True)]
        return response
    return visible


def describe_producers_rule(check: Check, r: describe_producers.DescribeProducersRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return describe_producers.TopicResponse(name=t.name, partitions=[
            describe_producers.PartitionResponse(partition_index=p, error_code=TOPIC_DENIED)
            for p in dict.fromkeys(t.partition_indexes)])
    return per_topic(check, r, "topics", Op.READ, entry, "topics")


def write_txn_markers_rule(check: Check, r: write_txn_markers.WriteTxnMarkersRequest) -> Outcome:
    if check.cluster(Op.CLUSTER_ACTION):
        return None
    return write_txn_markers.WriteTxnMarkersResponse(markers=[write_txn_markers.WritableTxnMarkerResult(
        producer_id=m.producer_id, topics=[write_txn_markers.WritableTxnMarkerTopicResult(name=t.name, partitions=[
            write_txn_markers.WritableTxnMarkerPartitionResult(partition_index=p, error_code=CLUSTER_DENIED)
            for p in dict.fromkeys(t.partition_indexes)]) for t in m.topics]) for m in r.markers])
