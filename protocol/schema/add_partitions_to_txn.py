"""AddPartitionsToTxn (key 24), versions 0-5; flexible from v3.

A transactional producer (v0-3) names the partitions it is about to write to in its transaction. v4
(KIP-890) is the broker-to-coordinator batch form: several transactions per request, each with a
`verify_only` flag (check that the partitions are already in the transaction rather than add them), and
a top-level error code in the response; clients keep using v0-3, whose fields Kafka names
`V3AndBelow...`. v5 is v4 where the coordinator may answer TRANSACTION_ABORTABLE.

The topic struct is one shape in both layouts (Kafka's common structs), so a handler reads
`AddPartitionsToTxnTopic` whichever version came in; likewise `AddPartitionsToTxnTopicResult`.
"""

from pybroker.protocol.schema.dsl import F, M

TOPIC = [
    F("name", "string"),
    F("partitions", "[]int32"),
]

TOPIC_RESULT = [
    F("name", "string"),
    F("results_by_partition", "[]AddPartitionsToTxnPartitionResult", fields=[
        F("partition_index", "int32"),
        F("partition_error_code", "int16"),
    ]),
]

REQUEST = M("AddPartitionsToTxnRequest", 24, "request", "0-5", "3+", [
    F("transactions", "[]AddPartitionsToTxnTransaction", "4+", fields=[
        F("transactional_id", "string", "4+"),
        F("producer_id", "int64", "4+"),
        F("producer_epoch", "int16", "4+"),
        F("verify_only", "bool", "4+", default=False),
        F("topics", "[]AddPartitionsToTxnTopic", "4+", fields=TOPIC),
    ]),
    F("v3_and_below_transactional_id", "string", "0-3"),
    F("v3_and_below_producer_id", "int64", "0-3"),
    F("v3_and_below_producer_epoch", "int16", "0-3"),
    F("v3_and_below_topics", "[]AddPartitionsToTxnTopic", "0-3", fields=TOPIC),
])

RESPONSE = M("AddPartitionsToTxnResponse", 24, "response", "0-5", "3+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "4+"),
    F("results_by_transaction", "[]AddPartitionsToTxnResult", "4+", fields=[
        F("transactional_id", "string", "4+"),
        F("topic_results", "[]AddPartitionsToTxnTopicResult", "4+", fields=TOPIC_RESULT),
    ]),
    F("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult", "0-3", fields=TOPIC_RESULT),
])
