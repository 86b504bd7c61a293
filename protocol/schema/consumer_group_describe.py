"""ConsumerGroupDescribe (key 69), versions 0-1; flexible in every version (KIP-848).

A consumer-protocol group as its coordinator holds it: group epoch, assignment epoch, the chosen server
assignor, and per member its epoch, subscription, current and target assignment. v1 adds each member's
type (KIP-1099: 0 classic, 1 consumer, -1 unknown); the request is the same in both versions.
"""

from pybroker.protocol.schema.dsl import F, M

_ASSIGNMENT = [
    F("topic_partitions", "[]DescribedTopicPartitions", fields=[
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("partitions", "[]int32"),
    ]),
]

REQUEST = M("ConsumerGroupDescribeRequest", 69, "request", "0-1", "0+", [
    F("group_ids", "[]string"),
    F("include_authorized_operations", "bool"),
])

RESPONSE = M("ConsumerGroupDescribeResponse", 69, "response", "0-1", "0+", [
    F("throttle_time_ms", "int32"),
    F("groups", "[]ConsumerDescribedGroup", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("group_epoch", "int32"),
        F("assignment_epoch", "int32"),
        F("assignor_name", "string"),
        F("members", "[]ConsumerDescribedMember", fields=[
            F("member_id", "string"),
            F("instance_id", "string", nullable="0+", default=None),
            F("rack_id", "string", nullable="0+", default=None),
            F("member_epoch", "int32"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", "[]string"),
            F("subscribed_topic_regex", "string", nullable="0+", default=None),
            F("assignment", "MemberAssignment", fields=_ASSIGNMENT),
            F("target_assignment", "MemberAssignment", fields=_ASSIGNMENT),
            F("member_type", "int8", "1+", default=-1),
        ]),
        F("authorized_operations", "int32", default=-(2**31)),
    ]),
])
