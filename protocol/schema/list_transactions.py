"""ListTransactions (key 66), versions 0-2; flexible in every version.

The transactions a coordinator holds, filtered by state names and producer ids (KIP-664); v1 adds a
duration filter (only transactions running longer than that many ms, KIP-994), v2 a transactional id
regular expression (KIP-1152; a bad one answers INVALID_REGULAR_EXPRESSION). Unknown state names are
echoed back in `unknown_state_filters`.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ListTransactionsRequest", 66, "request", "0-2", "0+", [
    F("state_filters", "[]string"),
    F("producer_id_filters", "[]int64"),
    F("duration_filter", "int64", "1+", default=-1),
    F("transactional_id_pattern", "string", "2+", nullable="2+", default=None),
])

RESPONSE = M("ListTransactionsResponse", 66, "response", "0-2", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("unknown_state_filters", "[]string"),
    F("transaction_states", "[]TransactionState", fields=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("transaction_state", "string"),
    ]),
])
