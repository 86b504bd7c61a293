"""OffsetDelete (key 47), version 0 only; never flexible.

Deletes committed offsets of a group for partitions it no longer subscribes to (KIP-496). Unusually,
the response puts the top-level error code before the throttle time.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("OffsetDeleteRequest", 47, "request", "0", "none", [
    F("group_id", "string"),
    F("topics", "[]OffsetDeleteRequestTopic", fields=[
        F("name", "string"),
        F("partitions", "[]OffsetDeleteRequestPartition", fields=[
            F("partition_index", "int32"),
        ]),
    ]),
])

RESPONSE = M("OffsetDeleteResponse", 47, "response", "0", "none", [
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    F("topics", "[]OffsetDeleteResponseTopic", fields=[
        F("name", "string"),
        F("partitions", "[]OffsetDeleteResponsePartition", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
])
