"""OffsetFetch (key 9), versions 0-9; flexible from v6.

v0 (dropped by Kafka 4, where it read ZooKeeper) has the same shape as v1. v2 allows a null topic
list (every committed topic) and adds a top-level error code, v3 throttle time, v5 the committed
leader epoch, v7 `require_stable`; v8 asks for many groups at once, moving everything into `groups`
(the single-group fields exist only in v0-7); v9 adds the KIP-848 member id and epoch. v10 (topic
ids instead of names) is not served.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("OffsetFetchRequest", 9, "request", "0-9", "6+", [
    F("group_id", "string", "0-7"),
    F("topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=[
        F("name", "string", "0-7"),
        F("partition_indexes", "[]int32", "0-7"),
    ]),
    F("groups", "[]OffsetFetchRequestGroup", "8+", fields=[
        F("group_id", "string", "8+"),
        F("member_id", "string", "9+", nullable="9+", default=None),
        F("member_epoch", "int32", "9+", default=-1),
        F("topics", "[]OffsetFetchRequestTopics", "8+", nullable="8+", fields=[
            F("name", "string", "8-9"),
            F("partition_indexes", "[]int32", "8+"),
        ]),
    ]),
    F("require_stable", "bool", "7+", default=False),
])

RESPONSE = M("OffsetFetchResponse", 9, "response", "0-9", "6+", [
    F("throttle_time_ms", "int32", "3+"),
    F("topics", "[]OffsetFetchResponseTopic", "0-7", fields=[
        F("name", "string", "0-7"),
        F("partitions", "[]OffsetFetchResponsePartition", "0-7", fields=[
            F("partition_index", "int32", "0-7"),
            F("committed_offset", "int64", "0-7"),
            F("committed_leader_epoch", "int32", "5-7", default=-1),
            F("metadata", "string", "0-7", nullable="0-7"),
            F("error_code", "int16", "0-7"),
        ]),
    ]),
    F("error_code", "int16", "2-7", default=0),
    F("groups", "[]OffsetFetchResponseGroup", "8+", fields=[
        F("group_id", "string", "8+"),
        F("topics", "[]OffsetFetchResponseTopics", "8+", fields=[
            F("name", "string", "8-9"),
            F("partitions", "[]OffsetFetchResponsePartitions", "8+", fields=[
                F("partition_index", "int32", "8+"),
                F("committed_offset", "int64", "8+"),
                F("committed_leader_epoch", "int32", "8+", default=-1),
                F("metadata", "string", "8+", nullable="8+"),
                F("error_code", "int16", "8+"),
            ]),
        ]),
        F("error_code", "int16", "8+", default=0),
    ]),
])
