"""OffsetForLeaderEpoch (key 23), versions 0-4; flexible from v4.

v1 returns the leader epoch of the end offset, v2 adds the current leader epoch (fencing) and
throttle time, v3 the replica id (-1 for consumers, -2 default).
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("OffsetForLeaderEpochRequest", 23, "request", "0-4", "4+", [
    F("replica_id", "int32", "3+", default=-2),
    F("topics", "[]OffsetForLeaderTopic", fields=[
        F("topic", "string"),
        F("partitions", "[]OffsetForLeaderPartition", fields=[
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "2+", default=-1),
            F("leader_epoch", "int32"),
        ]),
    ]),
])

RESPONSE = M("OffsetForLeaderEpochResponse", 23, "response", "0-4", "4+", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]OffsetForLeaderTopicResult", fields=[
        F("topic", "string"),
        F("partitions", "[]EpochEndOffset", fields=[
            F("error_code", "int16"),
            F("partition", "int32"),
            F("leader_epoch", "int32", "1+", default=-1),
            F("end_offset", "int64", default=-1),
        ]),
    ]),
])
