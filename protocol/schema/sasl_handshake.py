"""SaslHandshake (key 17), versions 0-1; never flexible.

v0: the SASL tokens that follow are raw (a 4-byte length, no Kafka header). v1: they travel in
SaslAuthenticate requests (KIP-152). The response lists the mechanisms the listener enables.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("SaslHandshakeRequest", 17, "request", "0-1", "none", [
    F("mechanism", "string"),
])

RESPONSE = M("SaslHandshakeResponse", 17, "response", "0-1", "none", [
    F("error_code", "int16"),
    F("mechanisms", "[]string"),
])
