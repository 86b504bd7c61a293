"""Metadata (key 3), versions 0-13; flexible from v9.

v0 asks for every topic with an empty list (v1+ use a null list for that); v4 adds the
auto-creation flag; v8-10 carry cluster authorized operations, removed again in v11 (DescribeCluster
took that job); v10 adds topic ids, v12 makes the topic name nullable (topics asked for by id) and v13
adds a top-level error code.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("MetadataRequest", 3, "request", "0-13", "9+", [
    F("topics", "[]MetadataRequestTopic", nullable="1+", fields=[
        F("topic_id", "uuid", "10+"),
        F("name", "string", nullable="10+"),
    ]),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),
    F("include_topic_authorized_operations", "bool", "8+"),
])

RESPONSE = M("MetadataResponse", 3, "response", "0-13", "9+", [
    F("throttle_time_ms", "int32", "3+"),
    F("brokers", "[]MetadataResponseBroker", fields=[
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "1+", nullable="1+", default=None),
    ]),
    F("cluster_id", "string", "2+", nullable="2+", default=None),
    F("controller_id", "int32", "1+", default=-1),
    F("topics", "[]MetadataResponseTopic", fields=[
        F("error_code", "int16"),
        F("name", "string", nullable="12+"),
        F("topic_id", "uuid", "10+"),
        F("is_internal", "bool", "1+", default=False),
        F("partitions", "[]MetadataResponsePartition", fields=[
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("offline_replicas", "[]int32", "5+"),
        ]),
        F("topic_authorized_operations", "int32", "8+", default=-(2**31)),
    ]),
    F("cluster_authorized_operations", "int32", "8-10", default=-(2**31)),
    F("error_code", "int16", "13+"),
])
