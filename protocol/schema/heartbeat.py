"""Heartbeat (key 12), versions 0-4; flexible from v4.

v1 adds throttle time to the response, v3 static membership (`group_instance_id`).
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("HeartbeatRequest", 12, "request", "0-4", "4+", [
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
])

RESPONSE = M("HeartbeatResponse", 12, "response", "0-4", "4+", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
])
