"""ListPartitionReassignments (key 46), version 0; flexible (KIP-455). A null topic list lists everything."""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ListPartitionReassignmentsRequest", 46, "request", "0", "0+", [
    F("timeout_ms", "int32", default=60000),
    F("topics", "[]ListPartitionReassignmentsTopics", nullable="0+", default=None, fields=[
        F("name", "string"),
        F("partition_indexes", "[]int32"),
    ]),
])

RESPONSE = M("ListPartitionReassignmentsResponse", 46, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("topics", "[]OngoingTopicReassignment", fields=[
        F("name", "string"),
        F("partitions", "[]OngoingPartitionReassignment", fields=[
            F("partition_index", "int32"),
            F("replicas", "[]int32"),
            F("adding_replicas", "[]int32"),
            F("removing_replicas", "[]int32"),
        ]),
    ]),
])
