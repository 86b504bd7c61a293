"""AlterPartitionReassignments (key 45), versions 0-1; flexible in every version (KIP-455).

v1 (KIP-860) adds `allow_replication_factor_change`, echoed in the response. A null replica list
cancels a pending reassignment.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("AlterPartitionReassignmentsRequest", 45, "request", "0-1", "0+", [
    F("timeout_ms", "int32", default=60000),
    F("allow_replication_factor_change", "bool", "1+", default=True),
    F("topics", "[]ReassignableTopic", fields=[
        F("name", "string"),
        F("partitions", "[]ReassignablePartition", fields=[
            F("partition_index", "int32"),
            F("replicas", "[]int32", nullable="0+", default=None),
        ]),
    ]),
])

RESPONSE = M("AlterPartitionReassignmentsResponse", 45, "response", "0-1", "0+", [
    F("throttle_time_ms", "int32"),
    F("allow_replication_factor_change", "bool", "1+", default=True),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("responses", "[]ReassignableTopicResponse", fields=[
        F("name", "string"),
        F("partitions", "[]ReassignablePartitionResponse", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ]),
])
