"""JoinGroup (key 11), versions 0-9; flexible from v6.

v1 adds the rebalance timeout (absent in v0: the session timeout stands in for it), v2 throttle
time; from v4 a member joining with an empty id is answered MEMBER_ID_REQUIRED with its new id and
must join again; v5 adds static membership (`group_instance_id`), v7 returns the protocol type
(KIP-559), v8 a leave/join reason (KIP-800), v9 `skip_assignment`.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("JoinGroupRequest", 11, "request", "0-9", "6+", [
    F("group_id", "string"),
    F("session_timeout_ms", "int32"),
    F("rebalance_timeout_ms", "int32", "1+", default=-1),
    F("member_id", "string"),
    F("group_instance_id", "string", "5+", nullable="5+", default=None),
    F("protocol_type", "string"),
    F("protocols", "[]JoinGroupRequestProtocol", fields=[
        F("name", "string"),
        F("metadata", "bytes"),
    ]),
    F("reason", "string", "8+", nullable="8+", default=None),
])

RESPONSE = M("JoinGroupResponse", 11, "response", "0-9", "6+", [
    F("throttle_time_ms", "int32", "2+"),
    F("error_code", "int16"),
    F("generation_id", "int32", default=-1),
    F("protocol_type", "string", "7+", nullable="7+", default=None),
    # Present in every version but nullable only from v7.
    F("protocol_name", "string", nullable="7+"),
    F("leader", "string"),
    F("skip_assignment", "bool", "9+", default=False),
    F("member_id", "string"),
    F("members", "[]JoinGroupResponseMember", fields=[
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("metadata", "bytes"),
    ]),
])
