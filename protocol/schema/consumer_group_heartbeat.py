"""ConsumerGroupHeartbeat (key 68), versions 0-1; flexible in every version (KIP-848).

The consumer protocol's only membership request: a member joins (epoch 0), heartbeats with its epoch
and what it owns, leaves (epoch -1, or -2 for a static member that will come back). Fields a member did
not change since its last heartbeat are sent as null. v1 adds the subscription regex (and with it the
INVALID_REGULAR_EXPRESSION answer); the answer carries the member's epoch and its assignment when that
changed.
"""

from pybroker.protocol.schema.dsl import F, M

_TOPIC_PARTITIONS = [
    F("topic_id", "uuid"),
    F("partitions", "[]int32"),
]

REQUEST = M("ConsumerGroupHeartbeatRequest", 68, "request", "0-1", "0+", [
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),
    F("instance_id", "string", nullable="0+", default=None),
    F("rack_id", "string", nullable="0+", default=None),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("subscribed_topic_names", "[]string", nullable="0+", default=None),
    F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
    F("server_assignor", "string", nullable="0+", default=None),
    F("topic_partitions", "[]HeartbeatTopicPartitions", nullable="0+", default=None, fields=_TOPIC_PARTITIONS),
])

RESPONSE = M("ConsumerGroupHeartbeatResponse", 68, "response", "0-1", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+", default=None),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("assignment", "HeartbeatAssignment", nullable="0+", default=None, fields=[
        F("topic_partitions", "[]AssignedTopicPartitions", fields=_TOPIC_PARTITIONS),
    ]),
])
