"""AlterClientQuotas (key 49), versions 0-1; flexible from 1.

Each entry names an entity (a list of type/name pairs; a null name is the type's default) and the
operations on its quota keys: set `value`, or `remove`. `validate_only` checks without applying.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("AlterClientQuotasRequest", 49, "request", "0-1", "1+", [
    F("entries", "[]EntryData", fields=[
        F("entity", "[]EntityData", fields=[
            F("entity_type", "string"),
            F("entity_name", "string", nullable="0+", default=None),
        ]),
        F("ops", "[]OpData", fields=[
            F("key", "string"),
            F("value", "float64"),
            F("remove", "bool"),
        ]),
    ]),
    F("validate_only", "bool"),
])

RESPONSE = M("AlterClientQuotasResponse", 49, "response", "0-1", "1+", [
    F("throttle_time_ms", "int32"),
    F("entries", "[]EntryData", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("entity", "[]EntityData", fields=[
            F("entity_type", "string"),
            F("entity_name", "string", nullable="0+", default=None),
        ]),
    ]),
])
