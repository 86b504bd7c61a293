"""ShareGroupDescribe (key 77), version 1; flexible (KIP-932).

Describes share groups: state, epochs, the assignor, and each member with its subscription and its
assignment (topic ids with their names). Version 0 was Kafka 4.0's early access, removed in 4.1.
A group that is not a share group is answered GROUP_ID_NOT_FOUND, as Kafka does.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ShareGroupDescribeRequest", 77, "request", "1", "0+", [
    F("group_ids", "[]string"),
    F("include_authorized_operations", "bool"),
])

RESPONSE = M("ShareGroupDescribeResponse", 77, "response", "1", "0+", [
    F("throttle_time_ms", "int32"),
    F("groups", "[]ShareDescribedGroup", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("group_epoch", "int32"),
        F("assignment_epoch", "int32"),
        F("assignor_name", "string"),
        F("members", "[]ShareDescribedMember", fields=[
            F("member_id", "string"),
            F("rack_id", "string", nullable="0+", default=None),
            F("member_epoch", "int32"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", "[]string"),
            F("assignment", "ShareDescribedAssignment", fields=[
                F("topic_partitions", "[]ShareDescribedTopicPartitions", fields=[
                    F("topic_id", "uuid"),
                    F("topic_name", "string"),
                    F("partitions", "[]int32"),
                ]),
            ]),
        ]),
        F("authorized_operations", "int32", default=-2147483648),
    ]),
])
