"""OffsetCommit (key 8), versions 0-9; flexible from v8.

v0 commits with no group membership; v1 adds the generation and member id and a per-partition
commit timestamp (v1 only); v2-4 carry a retention time instead (removed in v5: retention is broker
config); v3 adds throttle time, v6 the committed leader epoch, v7 static membership; v9 is v8 usable
with the KIP-848 protocol (the generation field then carries the member epoch). Kafka 4 dropped v0-1
(librdkafka still uses them); v10 (topic ids instead of names) is not served.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("OffsetCommitRequest", 8, "request", "0-9", "8+", [
    F("group_id", "string"),
    # Kafka 3.x called this GenerationId.
    F("generation_id_or_member_epoch", "int32", "1+", default=-1),
    F("member_id", "string", "1+"),
    F("group_instance_id", "string", "7+", nullable="7+", default=None),
    F("retention_time_ms", "int64", "2-4", default=-1),
    F("topics", "[]OffsetCommitRequestTopic", fields=[
        F("name", "string", "0-9"),
        F("partitions", "[]OffsetCommitRequestPartition", fields=[
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "6+", default=-1),
            F("commit_timestamp", "int64", "1", default=-1),
            F("committed_metadata", "string", nullable="0+"),
        ]),
    ]),
])

RESPONSE = M("OffsetCommitResponse", 8, "response", "0-9", "8+", [
    F("throttle_time_ms", "int32", "3+"),
    F("topics", "[]OffsetCommitResponseTopic", fields=[
        F("name", "string", "0-9"),
        F("partitions", "[]OffsetCommitResponsePartition", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
])
