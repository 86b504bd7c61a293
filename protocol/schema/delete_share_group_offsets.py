"""DeleteShareGroupOffsets (key 92), version 0; flexible (KIP-932).

Forgets a share group's state for whole topics (`kafka-share-groups --delete-offsets`); the group must
have no members.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DeleteShareGroupOffsetsRequest", 92, "request", "0", "0+", [
    F("group_id", "string"),
    F("topics", "[]DeleteShareGroupOffsetsRequestTopic", fields=[
        F("topic_name", "string"),
    ]),
])

RESPONSE = M("DeleteShareGroupOffsetsResponse", 92, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("responses", "[]DeleteShareGroupOffsetsResponseTopic", fields=[
        F("topic_name", "string"),
        F("topic_id", "uuid"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    ]),
])
