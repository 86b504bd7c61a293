"""InitProducerId (key 22), versions 0-5; flexible from v2.

v3 lets a producer pass its current id and epoch (KIP-360, to bump the epoch instead of losing its
state); v6's two-phase-commit flags are not served.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("InitProducerIdRequest", 22, "request", "0-5", "2+", [
    F("transactional_id", "string", nullable="0+"),
    F("transaction_timeout_ms", "int32"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
])

RESPONSE = M("InitProducerIdResponse", 22, "response", "0-5", "2+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
])
