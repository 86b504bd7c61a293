"""ListGroups (key 16), versions 0-5; flexible from v3.

v1 adds throttle time, v4 a state filter and each group's state (KIP-518), v5 a type filter and each
group's type ("classic", "consumer", ...; KIP-848). Empty filters match everything.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ListGroupsRequest", 16, "request", "0-5", "3+", [
    F("states_filter", "[]string", "4+"),
    F("types_filter", "[]string", "5+"),
])

RESPONSE = M("ListGroupsResponse", 16, "response", "0-5", "3+", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("groups", "[]ListedGroup", fields=[
        F("group_id", "string"),
        F("protocol_type", "string"),
        F("group_state", "string", "4+"),
        F("group_type", "string", "5+"),
    ]),
])
