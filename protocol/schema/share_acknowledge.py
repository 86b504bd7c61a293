"""ShareAcknowledge (key 79), versions 1-2; flexible (KIP-932).

Acknowledges records a share consumer was given, without fetching: the same acknowledgement batches as
ShareFetch's, in the member's share session (an epoch above 0, or -1 to acknowledge and close it).
Version 0 was Kafka 4.0's early access, removed in 4.1. Version 2 (KIP-1222) adds renew
acknowledgements (`is_renew_ack`) and answers the acquisition lock's duration, which a renew restarts.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ShareAcknowledgeRequest", 79, "request", "1-2", "0+", [
    F("group_id", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+"),
    F("share_session_epoch", "int32"),
    F("is_renew_ack", "bool", "2+", default=False),
    F("topics", "[]ShareAcknowledgeTopic", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]ShareAcknowledgePartition", fields=[
            F("partition_index", "int32"),
            F("acknowledgement_batches", "[]ShareAcknowledgementBatch", fields=[
                F("first_offset", "int64"),
                F("last_offset", "int64"),
                F("acknowledge_types", "[]int8"),
            ]),
        ]),
    ]),
])

RESPONSE = M("ShareAcknowledgeResponse", 79, "response", "1-2", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("acquisition_lock_timeout_ms", "int32", "2+"),
    F("responses", "[]ShareAcknowledgeTopicResponse", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]ShareAcknowledgePartitionData", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("current_leader", "ShareAcknowledgeLeaderIdAndEpoch", fields=[
                F("leader_id", "int32"),
                F("leader_epoch", "int32"),
            ]),
        ]),
    ]),
    F("node_endpoints", "[]ShareAcknowledgeNodeEndpoint", fields=[
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", nullable="0+", default=None),
    ]),
])
