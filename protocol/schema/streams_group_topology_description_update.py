"""StreamsGroupTopologyDescriptionUpdate (key 93), version 0; flexible (KIP-1331, Kafka 4.4).

A streams member pushes its topology's description (the processing nodes of each subtopology and its
global stores) when its heartbeat (StreamsGroupHeartbeat v1) says TopologyDescriptionRequired, so that
StreamsGroupDescribe v1 can show it. The answer is only an error code.
"""

from pybroker.protocol.schema.dsl import F, M
from pybroker.protocol.schema.streams_group_describe import description_fields

REQUEST = M("StreamsGroupTopologyDescriptionUpdateRequest", 93, "request", "0", "0+", [
    F("group_id", "string"),
    F("member_id", "string"),
    F("topology_epoch", "int32"),
    F("topology_description", "TopologyDescription", fields=description_fields("0+")),
])

RESPONSE = M("StreamsGroupTopologyDescriptionUpdateResponse", 93, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
])
