"""DescribeClientQuotas (key 48), versions 0-1; flexible from 1.

A filter is a list of components (entity type, match type 0 exact / 1 default / 2 any specified name,
the name for exact); `strict` excludes entities that have types the filter does not name. A null entry
list is Kafka's answer on error.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeClientQuotasRequest", 48, "request", "0-1", "1+", [
    F("components", "[]ComponentData", fields=[
        F("entity_type", "string"),
        F("match_type", "int8"),
        F("match", "string", nullable="0+", default=None),
    ]),
    F("strict", "bool"),
])

RESPONSE = M("DescribeClientQuotasResponse", 48, "response", "0-1", "1+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("entries", "[]EntryData", nullable="0+", default=None, fields=[
        F("entity", "[]EntityData", fields=[
            F("entity_type", "string"),
            F("entity_name", "string", nullable="0+", default=None),
        ]),
        F("values", "[]ValueData", fields=[
            F("key", "string"),
            F("value", "float64"),
        ]),
    ]),
])
