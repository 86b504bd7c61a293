"""The request and response headers that precede every message body.

Request header v0 is api key, version and correlation id (only ControlledShutdown v0 used it; we
never serve that); v1 adds the client id; v2 adds tagged fields and is used for flexible request
versions. The client id stays a classic int16-length nullable string even in v2: Kafka's spec pins
the field's own flexible versions to none, because a broker must read it before it knows whether
it can parse the rest.

Response header v0 is the correlation id alone; v1 adds tagged fields, for flexible response
versions (except ApiVersions, which always answers with v0: see `pybroker.protocol.frame_codec`).
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST_HEADER = M("RequestHeader", None, "header", "0-2", "2+", [
    F("api_key", "int16"),
    F("api_version", "int16"),
    F("correlation_id", "int32"),
    F("client_id", "string", "1+", nullable="1+", flexible="none", default=None),
])

RESPONSE_HEADER = M("ResponseHeader", None, "header", "0-1", "1+", [
    F("correlation_id", "int32"),
])

EXTRA = (REQUEST_HEADER, RESPONSE_HEADER)
