"""DescribeGroups (key 15), versions 0-6; flexible from v5.

v1 adds throttle time, v3 authorized operations, v4 members' group instance ids; v6 answers an
unknown group with GROUP_ID_NOT_FOUND and an error message (KIP-1043; older versions describe it as
Dead). Protocol data and member assignments are only filled in for a Stable group.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeGroupsRequest", 15, "request", "0-6", "5+", [
    F("groups", "[]string"),
    F("include_authorized_operations", "bool", "3+"),
])

RESPONSE = M("DescribeGroupsResponse", 15, "response", "0-6", "5+", [
    F("throttle_time_ms", "int32", "1+"),
    F("groups", "[]DescribedGroup", fields=[
        F("error_code", "int16"),
        F("error_message", "string", "6+", nullable="6+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("protocol_type", "string"),
        F("protocol_data", "string"),
        F("members", "[]DescribedGroupMember", fields=[
            F("member_id", "string"),
            F("group_instance_id", "string", "4+", nullable="4+", default=None),
            F("client_id", "string"),
            F("client_host", "string"),
            F("member_metadata", "bytes"),
            F("member_assignment", "bytes"),
        ]),
        F("authorized_operations", "int32", "3+", default=-(2**31)),
    ]),
])
