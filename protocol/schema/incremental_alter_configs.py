"""IncrementalAlterConfigs (key 44), versions 0-1; flexible from v1.

Each config carries an operation: 0 set, 1 delete, 2 append, 3 subtract (the last two for list
values). Struct names repeat AlterConfigs' (`AlterConfigsResource`, `AlterableConfig`), as Kafka's do.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("IncrementalAlterConfigsRequest", 44, "request", "0-1", "1+", [
    F("resources", "[]AlterConfigsResource", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", "[]AlterableConfig", fields=[
            F("name", "string"),
            F("config_operation", "int8"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("validate_only", "bool"),
])

RESPONSE = M("IncrementalAlterConfigsResponse", 44, "response", "0-1", "1+", [
    F("throttle_time_ms", "int32"),
    F("responses", "[]AlterConfigsResourceResponse", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    ]),
])
