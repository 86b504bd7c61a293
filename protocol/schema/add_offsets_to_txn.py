"""AddOffsetsToTxn (key 25), versions 0-4; flexible from v3.

A transactional producer announces that it will commit a group's offsets in its transaction (the
coordinator adds that group's `__consumer_offsets` partition). v1 is v0 (responses before throttling),
v2 allows PRODUCER_FENCED, v4 TRANSACTION_ABORTABLE (KIP-890). With transactions v2 a client sends
TxnOffsetCommit v5 directly instead.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("AddOffsetsToTxnRequest", 25, "request", "0-4", "3+", [
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("group_id", "string"),
])

RESPONSE = M("AddOffsetsToTxnResponse", 25, "response", "0-4", "3+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
])
