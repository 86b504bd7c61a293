"""AlterShareGroupOffsets (key 91), version 0; flexible (KIP-932).

Sets the start offset of a share group's share-partitions (`kafka-share-groups --reset-offsets`); the
group must have no members.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("AlterShareGroupOffsetsRequest", 91, "request", "0", "0+", [
    F("group_id", "string"),
    F("topics", "[]AlterShareGroupOffsetsRequestTopic", fields=[
        F("topic_name", "string"),
        F("partitions", "[]AlterShareGroupOffsetsRequestPartition", fields=[
            F("partition_index", "int32"),
            F("start_offset", "int64"),
        ]),
    ]),
])

RESPONSE = M("AlterShareGroupOffsetsResponse", 91, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("responses", "[]AlterShareGroupOffsetsResponseTopic", fields=[
        F("topic_name", "string"),
        F("topic_id", "uuid"),
        F("partitions", "[]AlterShareGroupOffsetsResponsePartition", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
        ]),
    ]),
])
