"""StreamsGroupDescribe (key 89), version 0; flexible (KIP-1071).

Describes streams groups: state, epochs, the topology as configured (internal topics with their partition
counts), and per member its process, endpoint, client tags, task offsets and its current and target task
assignment. Version 0 is Kafka 4.2's. Version 1 (Kafka 4.4, KIP-1331) asks for the topology description
(the processing nodes a member pushed with StreamsGroupTopologyDescriptionUpdate) and answers it with its
status (0 not requested, 1 not stored, 2 error, 3 available), and the name of the group's assignor.
"""

from pybroker.protocol.schema.dsl import F, Field, M

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

#: KIP-1331's topology description: shared with StreamsGroupTopologyDescriptionUpdate's request (from its v0)
def description_fields(since: str) -> list[Field]:
    node = [
        F("name", "string", since),
        F("node_type", "int8", since),
        F("source_topics", "[]string", since),
        F("sink_topic", "string", since, nullable=since, default=None),
        F("stores", "[]string", since),
        F("successors", "[]string", since),
    ]
    return [
        F("subtopologies", "[]TopologyDescriptionSubtopology", since, fields=[
            F("subtopology_id", "string", since),
            F("nodes", "[]TopologyDescriptionNode", since, fields=node),
        ]),
        F("global_stores", "[]TopologyDescriptionGlobalStore", since, fields=[
            F("source", "TopologyDescriptionNode", since, fields=node),
            F("processor", "TopologyDescriptionNode", since, fields=node),
        ]),
    ]


REQUEST = M("StreamsGroupDescribeRequest", 89, "request", "0-1", "0+", [
    F("group_ids", "[]string"),
    F("include_authorized_operations", "bool"),
    F("include_topology_description", "bool", "1+", default=False),
])

RESPONSE = M("StreamsGroupDescribeResponse", 89, "response", "0-1", "0+", [
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
        F("topology_description", "TopologyDescription", "1+", nullable="1+", default=None,
          fields=description_fields("1+")),
        F("topology_description_status", "int8", "1+", default=0),
        F("assignor_name", "string", "1+", nullable="1+", default=None),
    ]),
])
