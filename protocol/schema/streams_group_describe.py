"""StreamsGroupDescribe (key 89), version 0; flexible (KIP-1071).

Describes streams groups: state, epochs, the topology as configured (internal topics with their partition
counts), and per member its process, endpoint, client tags, task offsets and its current and target task
assignment. Version 0 is Kafka 4.2's; 4.4's v1 (the topology description, KIP-1331) is not served.
"""

from pybroker.protocol.schema.dsl import F, M

_KEY_VALUE = [F("key", "string"), F("value", "string")]
_TOPIC_INFO = [
    F("name", "string"),
    F("partitions", "int32"),
    F("replication_factor", "int16"),
    F("topic_configs", "[]KeyValue", fields=_KEY_VALUE),
]
_TASK_IDS = [F("subtopology_id", "string"), F("partitions", "[]int32")]
_TASK_OFFSET = [F("subtopology_id", "string"), F("partition", "int32"), F("offset", "int64")]
_ASSIGNMENT = [
    F("active_tasks", "[]TaskIds", fields=_TASK_IDS),
    F("standby_tasks", "[]TaskIds", fields=_TASK_IDS),
    F("warmup_tasks", "[]TaskIds", fields=_TASK_IDS),
]

REQUEST = M("StreamsGroupDescribeRequest", 89, "request", "0", "0+", [
    F("group_ids", "[]string"),
    F("include_authorized_operations", "bool"),
])

RESPONSE = M("StreamsGroupDescribeResponse", 89, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("groups", "[]DescribedGroup", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("group_epoch", "int32"),
        F("assignment_epoch", "int32"),
        F("topology", "Topology", nullable="0+", default=None, fields=[
            F("epoch", "int32"),
            F("subtopologies", "[]Subtopology", nullable="0+", default=None, fields=[
                F("subtopology_id", "string"),
                F("source_topics", "[]string"),
                F("repartition_sink_topics", "[]string"),
                F("state_changelog_topics", "[]TopicInfo", fields=_TOPIC_INFO),
                F("repartition_source_topics", "[]TopicInfo", fields=_TOPIC_INFO),
            ]),
        ]),
        F("members", "[]Member", fields=[
            F("member_id", "string"),
            F("member_epoch", "int32"),
            F("instance_id", "string", nullable="0+", default=None),
            F("rack_id", "string", nullable="0+", default=None),
            F("client_id", "string"),
            F("client_host", "string"),
            F("topology_epoch", "int32"),
            F("process_id", "string"),
            F("user_endpoint", "Endpoint", nullable="0+", default=None,
              fields=[F("host", "string"), F("port", "uint16")]),
            F("client_tags", "[]KeyValue", fields=_KEY_VALUE),
            F("task_offsets", "[]TaskOffset", fields=_TASK_OFFSET),
            F("task_end_offsets", "[]TaskOffset", fields=_TASK_OFFSET),
            F("assignment", "Assignment", fields=_ASSIGNMENT),
            F("target_assignment", "Assignment", fields=_ASSIGNMENT),
            F("is_classic", "bool"),
        ]),
        F("authorized_operations", "int32", default=-2147483648),
    ]),
])
