"""SaslAuthenticate (key 36), versions 0-2; flexible from v2. v1 adds the session lifetime (KIP-368)."""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("SaslAuthenticateRequest", 36, "request", "0-2", "2+", [
    F("auth_bytes", "bytes"),
])

RESPONSE = M("SaslAuthenticateResponse", 36, "response", "0-2", "2+", [
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+"),
])
