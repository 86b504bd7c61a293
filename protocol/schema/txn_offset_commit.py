"""TxnOffsetCommit (key 28), versions 0-5; flexible from v3.

A transactional producer commits a group's offsets inside its transaction: they stay pending until
the transaction's marker. v1 is v0, v2 adds the committed leader epoch, v3 the group generation,
member id and instance id (so the group coordinator can fence zombies: ILLEGAL_GENERATION,
FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID), v4 TRANSACTION_ABORTABLE; v5 (transactions v2, KIP-890) also
does AddOffsetsToTxn's work, which a client on transactions v1 must not rely on.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("TxnOffsetCommitRequest", 28, "request", "0-5", "3+", [
    F("transactional_id", "string"),
    F("group_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("generation_id", "int32", "3+", default=-1),
    F("member_id", "string", "3+"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("topics", "[]TxnOffsetCommitRequestTopic", fields=[
        F("name", "string"),
        F("partitions", "[]TxnOffsetCommitRequestPartition", fields=[
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "2+", default=-1),
            F("committed_metadata", "string", nullable="0+"),
        ]),
    ]),
])

RESPONSE = M("TxnOffsetCommitResponse", 28, "response", "0-5", "3+", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]TxnOffsetCommitResponseTopic", fields=[
        F("name", "string"),
        F("partitions", "[]TxnOffsetCommitResponsePartition", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
])
