"""DescribeTransactions (key 65), version 0; flexible.

The coordinator's view of each named transactional id (KIP-664): state name (Kafka's: "Empty",
"Ongoing", "PrepareCommit", ...), timeout, start time, producer id and epoch, and the partitions in the
transaction (while preparing, only those still without a marker). An empty request list answers nothing.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeTransactionsRequest", 65, "request", "0", "0+", [
    F("transactional_ids", "[]string"),
])

RESPONSE = M("DescribeTransactionsResponse", 65, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("transaction_states", "[]TransactionState", fields=[
        F("error_code", "int16"),
        F("transactional_id", "string"),
        F("transaction_state", "string"),
        F("transaction_timeout_ms", "int32"),
        F("transaction_start_time_ms", "int64"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("topics", "[]TopicData", fields=[
            F("topic", "string"),
            F("partitions", "[]int32"),
        ]),
    ]),
])
