"""AlterConfigs (key 33), versions 0-2; flexible from v2. v1 is the same as v0.

Replaces a resource's whole set of dynamic configs (unlisted keys revert to their defaults);
IncrementalAlterConfigs (key 44) is the per-key alternative.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("AlterConfigsRequest", 33, "request", "0-2", "2+", [
    F("resources", "[]AlterConfigsResource", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", "[]AlterableConfig", fields=[
            F("name", "string"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("validate_only", "bool"),
])

RESPONSE = M("AlterConfigsResponse", 33, "response", "0-2", "2+", [
    F("throttle_time_ms", "int32"),
    F("responses", "[]AlterConfigsResourceResponse", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    ]),
])
