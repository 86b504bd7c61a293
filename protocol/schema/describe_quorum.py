"""DescribeQuorum (key 55), versions 0-2; flexible in every version (KIP-595, KIP-836, KIP-853).

v1 adds each replica's last fetch and last caught-up timestamps; v2 each replica's directory id, error
messages and the voters' listeners.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeQuorumRequest", 55, "request", "0-2", "0+", [
    F("topics", "[]TopicData", fields=[
        F("topic_name", "string"),
        F("partitions", "[]PartitionData", fields=[
            F("partition_index", "int32"),
        ]),
    ]),
])

_REPLICA_STATE = [
    F("replica_id", "int32"),
    F("replica_directory_id", "uuid", "2+"),
    F("log_end_offset", "int64"),
    F("last_fetch_timestamp", "int64", "1+", default=-1),
    F("last_caught_up_timestamp", "int64", "1+", default=-1),
]

RESPONSE = M("DescribeQuorumResponse", 55, "response", "0-2", "0+", [
    F("error_code", "int16"),
    F("error_message", "string", "2+", nullable="2+"),
    F("topics", "[]TopicData", fields=[
        F("topic_name", "string"),
        F("partitions", "[]PartitionData", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", "2+", nullable="2+"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32"),
            F("high_watermark", "int64"),
            F("current_voters", "[]ReplicaState", fields=_REPLICA_STATE),
            F("observers", "[]ReplicaState", fields=_REPLICA_STATE),
        ]),
    ]),
    F("nodes", "[]Node", "2+", fields=[
        F("node_id", "int32", "2+"),
        F("listeners", "[]Listener", "2+", fields=[
            F("name", "string", "2+"),
            F("host", "string", "2+"),
            F("port", "uint16", "2+"),
        ]),
    ]),
])
