"""EndTxn (key 26), versions 0-5; flexible from v3.

Commits (`committed` true) or aborts a producer's transaction. v2 allows PRODUCER_FENCED, v4
TRANSACTION_ABORTABLE; v5 (transactions v2, KIP-890) means the coordinator bumps the epoch on every
commit or abort and answers the producer id and epoch the client must use next.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("EndTxnRequest", 26, "request", "0-5", "3+", [
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("committed", "bool"),
])

RESPONSE = M("EndTxnResponse", 26, "response", "0-5", "3+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", "5+", default=-1),
    F("producer_epoch", "int16", "5+", default=-1),
])
