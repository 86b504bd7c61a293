"""Authorization rules of the transaction APIs (Kafka's checks): InitProducerId, AddOffsetsToTxn, EndTxn,
and the admin APIs DescribeTransactions, ListTransactions, DescribeProducers and WriteTxnMarkers. Each
handler module picks its rule here when it registers; `authorization.call` runs it on the event loop. Each
rule answers as the others in `authorization` do: None (allowed), a response (refused), or a merge (partly
allowed). TxnOffsetCommit's rule stays with the group rules (`authorization_groups`); AddPartitionsToTxn's,
which answers with its handler's own per-partition results, is in its handler module.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.security.authorization_check import (
    CLUSTER_DENIED,
    GROUP,
    GROUP_DENIED,
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
from pybroker.protocol.messages import (
    add_offsets_to_txn,
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
