"""DeleteTopics (key 20), versions 0-6; flexible from v4.

v0-5 name topics in `topic_names`; v6 replaces it with `topics`, each named or identified by id.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DeleteTopicsRequest", 20, "request", "0-6", "4+", [
    F("topics", "[]DeleteTopicState", "6+", fields=[
        F("name", "string", "6+", nullable="6+", default=None),
        F("topic_id", "uuid", "6+"),
    ]),
    F("topic_names", "[]string", "0-5"),
    F("timeout_ms", "int32"),
])

RESPONSE = M("DeleteTopicsResponse", 20, "response", "0-6", "4+", [
    F("throttle_time_ms", "int32", "1+"),
    F("responses", "[]DeletableTopicResult", fields=[
        F("name", "string", nullable="6+"),
        F("topic_id", "uuid", "6+"),
        F("error_code", "int16"),
        F("error_message", "string", "5+", nullable="5+", default=None),
    ]),
])
