"""LeaveGroup (key 13), versions 0-5; flexible from v4.

v0-2 name one leaving member (`member_id`); v3 turns the request into a batch of member identities
(member id + group instance id) answered per member; v1 adds throttle time, v5 a reason per member
(KIP-800).
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("LeaveGroupRequest", 13, "request", "0-5", "4+", [
    F("group_id", "string"),
    F("member_id", "string", "0-2"),
    F("members", "[]MemberIdentity", "3+", fields=[
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("reason", "string", "5+", nullable="5+", default=None),
    ]),
])

RESPONSE = M("LeaveGroupResponse", 13, "response", "0-5", "4+", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("members", "[]MemberResponse", "3+", fields=[
        F("member_id", "string", "3+"),
        # Nullable, but (unlike the request's) without a null default.
        F("group_instance_id", "string", "3+", nullable="3+"),
        F("error_code", "int16", "3+"),
    ]),
])
