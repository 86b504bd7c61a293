"""DescribeConfigs (key 32), versions 0-4; flexible from v4.

v0 says whether a value is a default (`is_default`); v1 replaces that with a source code and adds
synonyms; v3 adds the config type and documentation.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeConfigsRequest", 32, "request", "0-4", "4+", [
    F("resources", "[]DescribeConfigsResource", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configuration_keys", "[]string", nullable="0+"),
    ]),
    F("include_synonyms", "bool", "1+", default=False),
    F("include_documentation", "bool", "3+", default=False),
])

RESPONSE = M("DescribeConfigsResponse", 32, "response", "0-4", "4+", [
    F("throttle_time_ms", "int32"),
    F("results", "[]DescribeConfigsResult", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", "[]DescribeConfigsResourceResult", fields=[
            F("name", "string"),
            F("value", "string", nullable="0+"),
            F("read_only", "bool"),
            F("config_source", "int8", "1+", default=-1),
            F("is_default", "bool", "0"),
            F("is_sensitive", "bool"),
            F("synonyms", "[]DescribeConfigsSynonym", "1+", fields=[
                F("name", "string", "1+"),
                F("value", "string", "1+", nullable="0+"),
                F("source", "int8", "1+"),
            ]),
            F("config_type", "int8", "3+", default=0),
            F("documentation", "string", "3+", nullable="0+"),
        ]),
    ]),
])
