"""ListConfigResources (key 74), versions 0-1; flexible in every version.

v0 was ListClientMetricsResources (KIP-714: it lists client-metrics resources only); v1 (KIP-1142)
asks for resource types (empty: every type that has configs) and names each resource's type.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("ListConfigResourcesRequest", 74, "request", "0-1", "0+", [
    F("resource_types", "[]int8", "1+"),
])

RESPONSE = M("ListConfigResourcesResponse", 74, "response", "0-1", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("config_resources", "[]ConfigResource", fields=[
        F("resource_name", "string"),
        F("resource_type", "int8", "1+", default=16),
    ]),
])
