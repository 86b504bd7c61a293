"""The streams group's records in `__consumer_offsets` (KIP-1071), from Kafka's group-coordinator record
specs. As for the consumer protocol's records, the key's int16 version says what the record is: 17 the
group's epoch (and the hash of the topics its assignment was computed from), 19 a member's metadata
(process, endpoint, client tags, topology epoch), 20 the target assignment's epoch, 21 a member's target
tasks, 22 a member's current tasks (its epoch, state, and tasks pending revocation), 23 the topology.
(18, once the topics' metadata, is no longer written.) Values are at version 0, flexible; a null value
deletes the key.
"""

from pybroker.protocol.schema.dsl import F, M

_TASK_IDS = [F("subtopology_id", "string"), F("partitions", "[]int32")]
_CURRENT_TASK_IDS = [
    F("subtopology_id", "string"),
    F("partitions", "[]int32"),
    F("assignment_epochs", "[]int32", nullable="0+", default=None, tag=0),
]
_TOPIC_INFO = [
    F("name", "string"),
    F("partitions", "int32"),
    F("replication_factor", "int16"),
    F("topic_configs", "[]TopicConfig", fields=[F("key", "string"), F("value", "string")]),
]

STREAMS_GROUP_METADATA_KEY = M("StreamsGroupMetadataKey", None, "data", "17", "none", [
    F("group_id", "string", "17"),
])

STREAMS_GROUP_METADATA_VALUE = M("StreamsGroupMetadataValue", None, "data", "0", "0+", [
    F("epoch", "int32"),
    F("metadata_hash", "int64"),
    F("validated_topology_epoch", "int32", default=-1, tag=0),
    F("last_assignment_configs", "[]LastAssignmentConfig", nullable="0+", default=None, tag=1,
      fields=[F("key", "string"), F("value", "string")]),
    F("stored_description_topology_epoch", "int32", default=-1, tag=2),
    F("failed_description_topology_epoch", "int32", default=-1, tag=3),
])

STREAMS_GROUP_MEMBER_METADATA_KEY = M("StreamsGroupMemberMetadataKey", None, "data", "19", "none", [
    F("group_id", "string", "19"),
    F("member_id", "string", "19"),
])

STREAMS_GROUP_MEMBER_METADATA_VALUE = M("StreamsGroupMemberMetadataValue", None, "data", "0", "0+", [
    F("instance_id", "string", nullable="0+", default=None),
    F("rack_id", "string", nullable="0+", default=None),
    F("client_id", "string"),
    F("client_host", "string"),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("topology_epoch", "int32"),
    F("process_id", "string"),
    F("user_endpoint", "Endpoint", nullable="0+", default=None, fields=[F("host", "string"), F("port", "uint16")]),
    F("client_tags", "[]KeyValue", fields=[F("key", "string"), F("value", "string")]),
])

STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = M(
    "StreamsGroupTargetAssignmentMetadataKey", None, "data", "20", "none", [
        F("group_id", "string", "20"),
    ])

STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = M(
    "StreamsGroupTargetAssignmentMetadataValue", None, "data", "0", "0+", [
        F("assignment_epoch", "int32"),
        F("assignment_timestamp", "int64", default=0, tag=0),
    ])

STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = M("StreamsGroupTargetAssignmentMemberKey", None, "data", "21", "none", [
    F("group_id", "string", "21"),
    F("member_id", "string", "21"),
])

STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = M(
    "StreamsGroupTargetAssignmentMemberValue", None, "data", "0", "0+", [
        F("active_tasks", "[]TaskIds", fields=_TASK_IDS),
        F("standby_tasks", "[]TaskIds", fields=_TASK_IDS),
        F("warmup_tasks", "[]TaskIds", fields=_TASK_IDS),
    ])

STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = M(
    "StreamsGroupCurrentMemberAssignmentKey", None, "data", "22", "none", [
        F("group_id", "string", "22"),
        F("member_id", "string", "22"),
    ])

STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = M(
    "StreamsGroupCurrentMemberAssignmentValue", None, "data", "0", "0+", [
        F("member_epoch", "int32"),
        F("previous_member_epoch", "int32"),
        F("state", "int8"),
        F("active_tasks", "[]TaskIds", fields=_CURRENT_TASK_IDS),
        F("standby_tasks", "[]TaskIds", fields=_CURRENT_TASK_IDS),
        F("warmup_tasks", "[]TaskIds", fields=_CURRENT_TASK_IDS),
        F("active_tasks_pending_revocation", "[]TaskIds", fields=_CURRENT_TASK_IDS),
        F("standby_tasks_pending_revocation", "[]TaskIds", fields=_CURRENT_TASK_IDS),
        F("warmup_tasks_pending_revocation", "[]TaskIds", fields=_CURRENT_TASK_IDS),
    ])

STREAMS_GROUP_TOPOLOGY_KEY = M("StreamsGroupTopologyKey", None, "data", "23", "none", [
    F("group_id", "string", "23"),
])

STREAMS_GROUP_TOPOLOGY_VALUE = M("StreamsGroupTopologyValue", None, "data", "0", "0+", [
    F("epoch", "int32"),
    F("subtopologies", "[]Subtopology", fields=[
        F("subtopology_id", "string"),
        F("source_topics", "[]string"),
        F("source_topic_regex", "[]string"),
        F("state_changelog_topics", "[]TopicInfo", fields=_TOPIC_INFO),
        F("repartition_sink_topics", "[]string"),
        F("repartition_source_topics", "[]TopicInfo", fields=_TOPIC_INFO),
        F("copartition_groups", "[]CopartitionGroup", fields=[
            F("source_topics", "[]int16"),
            F("source_topic_regex", "[]int16"),
            F("repartition_source_topics", "[]int16"),
        ]),
    ]),
])

EXTRA = (
    STREAMS_GROUP_METADATA_KEY, STREAMS_GROUP_METADATA_VALUE,
    STREAMS_GROUP_MEMBER_METADATA_KEY, STREAMS_GROUP_MEMBER_METADATA_VALUE,
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    STREAMS_GROUP_TOPOLOGY_KEY, STREAMS_GROUP_TOPOLOGY_VALUE,
)
