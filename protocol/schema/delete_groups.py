"""DeleteGroups (key 42), versions 0-2; flexible from v2. v1 is the same as v0."""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DeleteGroupsRequest", 42, "request", "0-2", "2+", [
    F("groups_names", "[]string"),
])

RESPONSE = M("DeleteGroupsResponse", 42, "response", "0-2", "2+", [
    F("throttle_time_ms", "int32"),
    F("results", "[]DeletableGroupResult", fields=[
        F("group_id", "string"),
        F("error_code", "int16"),
    ]),
])
