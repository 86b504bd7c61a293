"""CreateAcls (key 30), versions 0-3; flexible from v2.

v1 adds the resource pattern type (v0 means LITERAL); v3 adds the user resource type.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("CreateAclsRequest", 30, "request", "0-3", "2+", [
    F("creations", "[]AclCreation", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("resource_pattern_type", "int8", "1+", default=3),
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ]),
])

RESPONSE = M("CreateAclsResponse", 30, "response", "0-3", "2+", [
    F("throttle_time_ms", "int32"),
    F("results", "[]AclCreationResult", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    ]),
])
