"""Produce (key 0), versions 0-12; flexible from v9.

v0-2 carry the old message-set formats (opaque `records` to us; we answer them UNSUPPORTED_VERSION per
partition), v3 adds the transactional id and RecordBatch v2, v7 allows zstd, v8 per-batch record errors,
v10 the current leader hint (tagged), v11 TRANSACTION_ABORTABLE; v12 is v11 on the wire but, inside a
transaction, means transactions v2 (KIP-890): the broker adds the partition to the transaction itself,
with no AddPartitionsToTxn first. v13 (topic ids) is not served.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ProduceRequest", 0, "request", "0-12", "9+", [
    F("transactional_id", "string", "3+", nullable="3+", default=None),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    F("topic_data", "[]TopicProduceData", fields=[
        F("name", "string", "0-12"),
        F("partition_data", "[]PartitionProduceData", fields=[
            F("index", "int32"),
            F("records", "records", nullable="0+"),
        ]),
    ]),
])

RESPONSE = M("ProduceResponse", 0, "response", "0-12", "9+", [
    F("responses", "[]TopicProduceResponse", fields=[
        F("name", "string", "0-12"),
        F("partition_responses", "[]PartitionProduceResponse", fields=[
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("record_errors", "[]BatchIndexAndErrorMessage", "8+", fields=[
                F("batch_index", "int32", "8+"),
                F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
            ]),
            F("error_message", "string", "8+", nullable="8+", default=None),
            F("current_leader", "LeaderIdAndEpoch", "10+", tag=0, fields=[
                F("leader_id", "int32", "10+", default=-1),
                F("leader_epoch", "int32", "10+", default=-1),
            ]),
        ]),
    ]),
    F("throttle_time_ms", "int32", "1+", default=0),
    F("node_endpoints", "[]NodeEndpoint", "10+", tag=0, fields=[
        F("node_id", "int32", "10+"),
        F("host", "string", "10+"),
        F("port", "int32", "10+"),
        F("rack", "string", "10+", nullable="10+", default=None),
    ]),
])
