"""DeleteRecords (key 21), versions 0-2; flexible from v2. v1 is the same as v0.

Moves each partition's log start offset up to `offset` (-1 means the high watermark) and answers
the new low watermark.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DeleteRecordsRequest", 21, "request", "0-2", "2+", [
    F("topics", "[]DeleteRecordsTopic", fields=[
        F("name", "string"),
        F("partitions", "[]DeleteRecordsPartition", fields=[
            F("partition_index", "int32"),
            F("offset", "int64"),
        ]),
    ]),
    F("timeout_ms", "int32"),
])

RESPONSE = M("DeleteRecordsResponse", 21, "response", "0-2", "2+", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]DeleteRecordsTopicResult", fields=[
        F("name", "string"),
        F("partitions", "[]DeleteRecordsPartitionResult", fields=[
            F("partition_index", "int32"),
            F("low_watermark", "int64"),
            F("error_code", "int16"),
        ]),
    ]),
])
