"""GetTelemetrySubscriptions (key 71), version 0; flexible (KIP-714).

A client asks which of its metrics the broker wants, how often, how compressed and how large; the
first request carries the zero client instance id and the answer assigns one.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("GetTelemetrySubscriptionsRequest", 71, "request", "0", "0+", [
    F("client_instance_id", "uuid"),
])

RESPONSE = M("GetTelemetrySubscriptionsResponse", 71, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("client_instance_id", "uuid"),
    F("subscription_id", "int32"),
    F("accepted_compression_types", "[]int8"),
    F("push_interval_ms", "int32"),
    F("telemetry_max_bytes", "int32"),
    F("delta_temporality", "bool"),
    F("requested_metrics", "[]string"),
])
