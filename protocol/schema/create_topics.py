"""CreateTopics (key 19), versions 0-7; flexible from v5.

v1 adds validate-only and error messages, v4 lets partitions and replication factor default (-1), v5
returns the new topic's partition count, replication factor and configs, v7 its topic id.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("CreateTopicsRequest", 19, "request", "0-7", "5+", [
    F("topics", "[]CreatableTopic", fields=[
        F("name", "string"),
        F("num_partitions", "int32"),
        F("replication_factor", "int16"),
        F("assignments", "[]CreatableReplicaAssignment", fields=[
            F("partition_index", "int32"),
            F("broker_ids", "[]int32"),
        ]),
        F("configs", "[]CreatableTopicConfig", fields=[
            F("name", "string"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("timeout_ms", "int32", default=60000),
    F("validate_only", "bool", "1+", default=False),
])

RESPONSE = M("CreateTopicsResponse", 19, "response", "0-7", "5+", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]CreatableTopicResult", fields=[
        F("name", "string"),
        F("topic_id", "uuid", "7+"),
        F("error_code", "int16"),
        F("error_message", "string", "1+", nullable="0+"),
        F("topic_config_error_code", "int16", "5+", tag=0),
        F("num_partitions", "int32", "5+", default=-1),
        F("replication_factor", "int16", "5+", default=-1),
        F("configs", "[]CreatableTopicConfigs", "5+", nullable="5+", fields=[
            F("name", "string", "5+"),
            F("value", "string", "5+", nullable="5+"),
            F("read_only", "bool", "5+"),
            F("config_source", "int8", "5+", default=-1),
            F("is_sensitive", "bool", "5+"),
        ]),
    ]),
])
