"""DescribeLogDirs (key 35), versions 0-4; flexible from v2.

v0 (dropped by Kafka 4) and v1 are the same shape; a null topic list asks for every partition. v3
adds a top-level error code, v4 each dir's total and usable bytes. v5 (`is_cordoned`) is not served.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeLogDirsRequest", 35, "request", "0-4", "2+", [
    F("topics", "[]DescribableLogDirTopic", nullable="0+", fields=[
        F("topic", "string"),
        F("partitions", "[]int32"),
    ]),
])

RESPONSE = M("DescribeLogDirsResponse", 35, "response", "0-4", "2+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "3+"),
    F("results", "[]DescribeLogDirsResult", fields=[
        F("error_code", "int16"),
        F("log_dir", "string"),
        F("topics", "[]DescribeLogDirsTopic", fields=[
            F("name", "string"),
            F("partitions", "[]DescribeLogDirsPartition", fields=[
                F("partition_index", "int32"),
                F("partition_size", "int64"),
                F("offset_lag", "int64"),
                F("is_future_key", "bool"),
            ]),
        ]),
        F("total_bytes", "int64", "4+", default=-1),
        F("usable_bytes", "int64", "4+", default=-1),
    ]),
])
