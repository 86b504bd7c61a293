"""Connections the broker refused or closed on its own: the counters of the connection limits.

Incremented where the decision is made (rare events, never per request); the memory pool's figures are
gauges the collector reads at scrape time.
"""

from __future__ import annotations

from prometheus_client import Counter

CONNECTIONS_REFUSED = Counter("pybroker_connections_refused",
                              "Connections closed as soon as they were accepted, by the limit they were over "
                              "(max.connections, max.connections.per.ip, max.connection.creation.rate, "
                              "connection_creation_rate).", ["reason"])
CONNECTIONS_EXPIRED = Counter("pybroker_connections_expired",
                              "Connections the broker closed for silence: idle (connections.max.idle.ms) or a "
                              "frame that stopped arriving half way (stalled_frame).", ["reason"])
