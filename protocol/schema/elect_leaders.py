"""ElectLeaders (key 43), versions 0-2; flexible from v2 (KIP-460).

v1 adds the election type (0 preferred, 1 unclean) and a top-level error code. A null partition list
asks for every partition.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ElectLeadersRequest", 43, "request", "0-2", "2+", [
    F("election_type", "int8", "1+"),
    F("topic_partitions", "[]TopicPartitions", nullable="0+", fields=[
        F("topic", "string"),
        F("partitions", "[]int32"),
    ]),
    F("timeout_ms", "int32", default=60000),
])

RESPONSE = M("ElectLeadersResponse", 43, "response", "0-2", "2+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "1+"),
    F("replica_election_results", "[]ReplicaElectionResult", fields=[
        F("topic", "string"),
        F("partition_result", "[]PartitionResult", fields=[
            F("partition_id", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ]),
])
