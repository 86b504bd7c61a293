"""ShareGroupHeartbeat (key 76), version 1; flexible (KIP-932).

A share group's only membership request: a member joins (epoch 0, its member id chosen by the client,
a UUID), heartbeats with its epoch, and leaves (epoch -1). Version 0 was Kafka 4.0's early access and
was removed in 4.1, so 1 is the only version. Unlike a consumer group's heartbeat there is no owned
assignment to report and no revocation: a share-partition may be read by many members at once, so the
answer simply carries the member's assignment whenever it changed.
"""

from pybroker.protocol.schema.dsl import F, M

_TOPIC_PARTITIONS = [
    F("topic_id", "uuid"),
    F("partitions", "[]int32"),
]

REQUEST = M("ShareGroupHeartbeatRequest", 76, "request", "1", "0+", [
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),
    F("rack_id", "string", nullable="0+", default=None),
    F("subscribed_topic_names", "[]string", nullable="0+", default=None),
])

RESPONSE = M("ShareGroupHeartbeatResponse", 76, "response", "1", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+", default=None),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("assignment", "ShareHeartbeatAssignment", nullable="0+", default=None, fields=[
        F("topic_partitions", "[]ShareAssignedTopicPartitions", fields=_TOPIC_PARTITIONS),
    ]),
])
