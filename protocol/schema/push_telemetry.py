"""PushTelemetry (key 72), version 0; flexible (KIP-714).

The client's metrics, an OpenTelemetry `MetricsData` protobuf, compressed with one of the types the
subscription accepted.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("PushTelemetryRequest", 72, "request", "0", "0+", [
    F("client_instance_id", "uuid"),
    F("subscription_id", "int32"),
    F("terminating", "bool"),
    F("compression_type", "int8"),
    F("metrics", "bytes"),
])

RESPONSE = M("PushTelemetryResponse", 72, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
])
