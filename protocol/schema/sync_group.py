"""SyncGroup (key 14), versions 0-5; flexible from v4.

v1 adds throttle time, v3 static membership (`group_instance_id`); from v5 the member sends the
protocol type and name it joined with and the broker echoes them back (KIP-559), rejecting a
mismatch with INCONSISTENT_GROUP_PROTOCOL.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("SyncGroupRequest", 14, "request", "0-5", "4+", [
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("protocol_type", "string", "5+", nullable="5+", default=None),
    F("protocol_name", "string", "5+", nullable="5+", default=None),
    F("assignments", "[]SyncGroupRequestAssignment", fields=[
        F("member_id", "string"),
        F("assignment", "bytes"),
    ]),
])

RESPONSE = M("SyncGroupResponse", 14, "response", "0-5", "4+", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("protocol_type", "string", "5+", nullable="5+", default=None),
    F("protocol_name", "string", "5+", nullable="5+", default=None),
    F("assignment", "bytes"),
])
