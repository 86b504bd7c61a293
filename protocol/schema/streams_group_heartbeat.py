"""StreamsGroupHeartbeat (key 88), version 0; flexible (KIP-1071, the Streams rebalance protocol).

A Kafka Streams member joins (epoch 0, with its topology), heartbeats with its epoch and the tasks it owns,
and leaves (epoch -1; -2: a static member that will come back). The coordinator validates the topology,
creates its internal topics, computes a target task assignment (active, standby and warm-up tasks) and
answers the member's epoch, its tasks when they changed, and the group's status (missing topics, a stale
topology, a requested shutdown). Fields a member did not change since its last heartbeat are null.
Version 0 is Kafka 4.2's. Version 1 (Kafka 4.4, KIP-1331) has the same request; its response carries the
acceptable recovery lag as an int64 (the v0 int32 is gone) and TopologyDescriptionRequired, and it may carry
the MISSING_CLIENT_TAGS status (code 6), which a v0 member would not understand.
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
_ENDPOINT = [F("host", "string"), F("port", "uint16")]

REQUEST = M("StreamsGroupHeartbeatRequest", 88, "request", "0-1", "0+", [
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),
    F("endpoint_information_epoch", "int32"),
    F("instance_id", "string", nullable="0+", default=None),
    F("rack_id", "string", nullable="0+", default=None),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("topology", "Topology", nullable="0+", default=None, fields=[
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
    ]),
    F("active_tasks", "[]TaskIds", nullable="0+", default=None, fields=_TASK_IDS),
    F("standby_tasks", "[]TaskIds", nullable="0+", default=None, fields=_TASK_IDS),
    F("warmup_tasks", "[]TaskIds", nullable="0+", default=None, fields=_TASK_IDS),
    F("process_id", "string", nullable="0+", default=None),
    F("user_endpoint", "Endpoint", nullable="0+", default=None, fields=_ENDPOINT),
    F("client_tags", "[]KeyValue", nullable="0+", default=None, fields=_KEY_VALUE),
    F("task_offsets", "[]TaskOffset", nullable="0+", default=None, fields=_TASK_OFFSET),
    F("task_end_offsets", "[]TaskOffset", nullable="0+", default=None, fields=_TASK_OFFSET),
    F("shutdown_application", "bool", default=False),
])

RESPONSE = M("StreamsGroupHeartbeatResponse", 88, "response", "0-1", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("member_id", "string"),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("acceptable_recovery_lag_legacy", "int32", "0"),
    F("task_offset_interval_ms", "int32"),
    F("acceptable_recovery_lag", "int64", "1+", default=-1),
    F("status", "[]Status", nullable="0+", default=None, fields=[
        F("status_code", "int8"),
        F("status_detail", "string"),
    ]),
    F("active_tasks", "[]TaskIds", nullable="0+", default=None, fields=_TASK_IDS),
    F("standby_tasks", "[]TaskIds", nullable="0+", default=None, fields=_TASK_IDS),
    F("warmup_tasks", "[]TaskIds", nullable="0+", default=None, fields=_TASK_IDS),
    F("topology_description_required", "bool", "1+", default=False),
    F("endpoint_information_epoch", "int32"),
    F("partitions_by_user_endpoint", "[]EndpointToPartitions", nullable="0+", default=None, fields=[
        F("user_endpoint", "Endpoint", fields=_ENDPOINT),
        F("active_partitions", "[]TopicPartition", fields=[F("topic", "string"), F("partitions", "[]int32")]),
        F("standby_partitions", "[]TopicPartition", fields=[F("topic", "string"), F("partitions", "[]int32")]),
    ]),
])
