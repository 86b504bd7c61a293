"""FindCoordinator (key 10), versions 0-6; flexible from v3.

v1 adds the key type (0 group, 1 transaction) and, in the response, throttle time and an error
message; v4 (KIP-699) batches lookups: the single `key` and the single-coordinator response fields
exist only in v0-3, replaced by `coordinator_keys` / `coordinators`. v5 may answer
TRANSACTION_ABORTABLE; v6 adds key type 2 (share groups, key "groupId:topicId:partition").
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("FindCoordinatorRequest", 10, "request", "0-6", "3+", [
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+", default=0),
    F("coordinator_keys", "[]string", "4+"),
])

RESPONSE = M("FindCoordinatorResponse", 10, "response", "0-6", "3+", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0-3"),
    F("error_message", "string", "1-3", nullable="1-3"),
    F("node_id", "int32", "0-3"),
    F("host", "string", "0-3"),
    F("port", "int32", "0-3"),
    F("coordinators", "[]Coordinator", "4+", fields=[
        F("key", "string", "4+"),
        F("node_id", "int32", "4+"),
        F("host", "string", "4+"),
        F("port", "int32", "4+"),
        F("error_code", "int16", "4+"),
        F("error_message", "string", "4+", nullable="4+"),
    ]),
])
