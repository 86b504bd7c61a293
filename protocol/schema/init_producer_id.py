"""InitProducerId (key 22), versions 0-6; flexible from v2.

v3 lets a producer pass its current id and epoch (KIP-360, to bump the epoch instead of losing its
state), v4 allows PRODUCER_FENCED, v5 TRANSACTION_ABORTABLE (KIP-890). v6 is two-phase commit (KIP-939):
`enable_2pc` asks for a transaction that never times out, `keep_prepared_txn` keeps a prepared
transaction instead of aborting it, and the response names that ongoing transaction's producer id and
epoch (-1 when there is none). Kafka 4.2 still marks v6 unstable.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("InitProducerIdRequest", 22, "request", "0-6", "2+", [
    F("transactional_id", "string", nullable="0+"),
    F("transaction_timeout_ms", "int32"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
    F("enable_2pc", "bool", "6+", default=False),
    F("keep_prepared_txn", "bool", "6+", default=False),
])

RESPONSE = M("InitProducerIdResponse", 22, "response", "0-6", "2+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
    F("ongoing_txn_producer_id", "int64", "6+", default=-1),
    F("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
])
