"""DescribeShareGroupOffsets (key 90), versions 0-1; flexible (KIP-932).

Per share group and topic partition (all those the group has state for when the topics are null), the
share-partition's start offset: every record below it is done. Version 1 adds the lag (records from the
start offset to the high watermark not yet acknowledged or archived, -1 when unknown).
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeShareGroupOffsetsRequest", 90, "request", "0-1", "0+", [
    F("groups", "[]DescribeShareGroupOffsetsRequestGroup", fields=[
        F("group_id", "string"),
        F("topics", "[]DescribeShareGroupOffsetsRequestTopic", nullable="0+", fields=[
            F("topic_name", "string"),
            F("partitions", "[]int32"),
        ]),
    ]),
])

RESPONSE = M("DescribeShareGroupOffsetsResponse", 90, "response", "0-1", "0+", [
    F("throttle_time_ms", "int32"),
    F("groups", "[]DescribeShareGroupOffsetsResponseGroup", fields=[
        F("group_id", "string"),
        F("topics", "[]DescribeShareGroupOffsetsResponseTopic", fields=[
            F("topic_name", "string"),
            F("topic_id", "uuid"),
            F("partitions", "[]DescribeShareGroupOffsetsResponsePartition", fields=[
                F("partition_index", "int32"),
                F("start_offset", "int64"),
                F("leader_epoch", "int32"),
                F("lag", "int64", "1+", default=-1),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
            ]),
        ]),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    ]),
])
