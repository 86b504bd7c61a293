"""ListOffsets (key 2), versions 0-10; flexible from v6.

v0 asks for up to `max_num_offsets` offsets and answers a list (`old_style_offsets`); v1 answers one
offset and its timestamp; v2 adds the isolation level, v4 leader epochs, v7 the max-timestamp query
(-3), v8 earliest-local (-4), v9 earliest-pending-upload (-5), v10 a timeout.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ListOffsetsRequest", 2, "request", "0-10", "6+", [
    F("replica_id", "int32"),
    F("isolation_level", "int8", "2+"),
    F("topics", "[]ListOffsetsTopic", fields=[
        F("name", "string"),
        F("partitions", "[]ListOffsetsPartition", fields=[
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F("timestamp", "int64"),
            F("max_num_offsets", "int32", "0", default=1),
        ]),
    ]),
    F("timeout_ms", "int32", "10+"),
])

RESPONSE = M("ListOffsetsResponse", 2, "response", "0-10", "6+", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]ListOffsetsTopicResponse", fields=[
        F("name", "string"),
        F("partitions", "[]ListOffsetsPartitionResponse", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("old_style_offsets", "[]int64", "0"),
            F("timestamp", "int64", "1+", default=-1),
            F("offset", "int64", "1+", default=-1),
            F("leader_epoch", "int32", "4+", default=-1),
        ]),
    ]),
])
