"""SASL authentications by outcome: how often clients log in, fail, or let a session expire.

Incremented once per authentication exchange (never per request).
"""

from __future__ import annotations

from prometheus_client import Counter

AUTHENTICATIONS = Counter("pybroker_sasl_authentications",
                          "SASL authentication exchanges that ended, by listener, mechanism and result "
                          "(success, failure, reauthentication).", ["listener", "mechanism", "result"])
SASL_CONNECTIONS_CLOSED = Counter("pybroker_sasl_connections_closed",
                                  "Connections closed by the SASL layer: a request before authentication "
                                  "(illegal_state), an unsupported mechanism, or an expired session "
                                  "(session_expired, connections.max.reauth.ms).", ["reason"])
