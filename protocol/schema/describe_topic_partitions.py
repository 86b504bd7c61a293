"""DescribeTopicPartitions (key 75), version 0; flexible (KIP-966).

Metadata's topic answer, paginated: at most `response_partition_limit` partitions per answer, starting
at `cursor` (a topic name and partition index); `next_cursor` says where the next request starts, null
when everything was listed. Each partition also carries the eligible leader replicas (ELR).
"""

from pybroker.protocol.schema.dsl import F, M

_CURSOR = [
    F("topic_name", "string"),
    F("partition_index", "int32"),
]

REQUEST = M("DescribeTopicPartitionsRequest", 75, "request", "0", "0+", [
    F("topics", "[]TopicRequest", fields=[
        F("name", "string"),
    ]),
    F("response_partition_limit", "int32", default=2000),
    F("cursor", "Cursor", nullable="0+", default=None, fields=_CURSOR),
])

RESPONSE = M("DescribeTopicPartitionsResponse", 75, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]DescribeTopicPartitionsResponseTopic", fields=[
        F("error_code", "int16"),
        F("name", "string", nullable="0+"),
        F("topic_id", "uuid"),
        F("is_internal", "bool", default=False),
        F("partitions", "[]DescribeTopicPartitionsResponsePartition", fields=[
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("eligible_leader_replicas", "[]int32", nullable="0+", default=None),
            F("last_known_elr", "[]int32", nullable="0+", default=None),
            F("offline_replicas", "[]int32"),
        ]),
        F("topic_authorized_operations", "int32", default=-(2**31)),
    ]),
    F("next_cursor", "Cursor", nullable="0+", default=None, fields=_CURSOR),
])
