"""The records of `__transaction_state`: key and value, each preceded on disk by an int16 version.

Facts from Kafka's transaction-coordinator record specs (TransactionLogKey, TransactionLogValue). The
key's version is Kafka's coordinator record type for the transaction log, 0, and holds the transactional
id. The value holds the transactional id's producer id and epoch, timeout, state (Kafka's int8 state id),
the partitions of the ongoing transaction (null while Empty) and two timestamps; a null value is a
tombstone (the id expired).

Value v1 is flexible (KIP-915: new fields only as tagged fields): the previous and next producer ids
(tags 0, 1: transactions v2 and epoch exhaustion hand a producer a new id), the client's transaction
version (tag 2), and the next producer epoch (tag 3, from Kafka 4.2: KIP-939's prepared transactions
keep one identity while the next is handed out).
"""

from pybroker.protocol.schema.dsl import F, M

TRANSACTION_LOG_KEY = M("TransactionLogKey", None, "data", "0", "none", [
    F("transactional_id", "string"),
])

TRANSACTION_LOG_VALUE = M("TransactionLogValue", None, "data", "0-1", "1+", [
    F("producer_id", "int64"),
    F("previous_producer_id", "int64", "1+", tag=0, default=-1),
    F("next_producer_id", "int64", "1+", tag=1, default=-1),
    F("producer_epoch", "int16"),
    F("transaction_timeout_ms", "int32"),
    F("transaction_status", "int8"),
    F("transaction_partitions", "[]PartitionsSchema", nullable="0+", fields=[
        F("topic", "string"),
        F("partition_ids", "[]int32"),
    ]),
    F("transaction_last_update_timestamp_ms", "int64"),
    F("transaction_start_timestamp_ms", "int64"),
    F("client_transaction_version", "int16", "1+", tag=2, default=0),
    F("next_producer_epoch", "int16", "1+", tag=3, default=-1),
])

EXTRA = (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)
