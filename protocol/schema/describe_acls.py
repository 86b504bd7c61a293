"""DescribeAcls (key 29), versions 0-3; flexible from v2.

v1 adds the pattern type filter (v0 means LITERAL); v3 adds the user resource type.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeAclsRequest", 29, "request", "0-3", "2+", [
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", nullable="0+"),
    F("host_filter", "string", nullable="0+"),
    F("operation", "int8"),
    F("permission_type", "int8"),
])

RESPONSE = M("DescribeAclsResponse", 29, "response", "0-3", "2+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("resources", "[]DescribeAclsResource", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("pattern_type", "int8", "1+", default=3),
        F("acls", "[]AclDescription", fields=[
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ]),
])
