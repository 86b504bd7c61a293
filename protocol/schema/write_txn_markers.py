"""WriteTxnMarkers (key 27), versions 1-2; flexible in every version.

The coordinator's order to a partition leader: write a commit or abort marker (`transaction_result`
true = COMMIT) for a producer into these partitions. Kafka's admin tools also send it to abort a hanging
transaction. Kafka 4 removed v0 (v1, the first flexible version, is the baseline); v2 adds each
marker's transaction version (KIP-1228: 0/1 legacy, 2 = transactions v2).
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("WriteTxnMarkersRequest", 27, "request", "1-2", "1+", [
    F("markers", "[]WritableTxnMarker", fields=[
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("transaction_result", "bool"),
        F("topics", "[]WritableTxnMarkerTopic", fields=[
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ]),
        F("coordinator_epoch", "int32"),
        F("transaction_version", "int8", "2+", default=0),
    ]),
])

RESPONSE = M("WriteTxnMarkersResponse", 27, "response", "1-2", "1+", [
    F("markers", "[]WritableTxnMarkerResult", fields=[
        F("producer_id", "int64"),
        F("topics", "[]WritableTxnMarkerTopicResult", fields=[
            F("name", "string"),
            F("partitions", "[]WritableTxnMarkerPartitionResult", fields=[
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ]),
])
