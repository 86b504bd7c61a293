"""DescribeProducers (key 61), version 0; flexible.

The active producers of each partition as the partition leader's producer state holds them (KIP-664:
how an operator finds a hanging transaction, then aborts it with WriteTxnMarkers). The epoch is an
int32 here, unlike everywhere else.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeProducersRequest", 61, "request", "0", "0+", [
    F("topics", "[]TopicRequest", fields=[
        F("name", "string"),
        F("partition_indexes", "[]int32"),
    ]),
])

RESPONSE = M("DescribeProducersResponse", 61, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]TopicResponse", fields=[
        F("name", "string"),
        F("partitions", "[]PartitionResponse", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("active_producers", "[]ProducerState", fields=[
                F("producer_id", "int64"),
                F("producer_epoch", "int32"),
                F("last_sequence", "int32", default=-1),
                F("last_timestamp", "int64", default=-1),
                F("coordinator_epoch", "int32"),
                F("current_txn_start_offset", "int64", default=-1),
            ]),
        ]),
    ]),
])
