"""What a handler knows about the request it serves, besides the request itself.

`principal` is who the connection authenticated as, in Kafka's `Type:name` form: `User:ANONYMOUS` on a
PLAINTEXT listener, the mapped certificate name on mutual TLS, the SASL user after authentication.
`listener` names the listener the request came in on (`PLAINTEXT`, `SASL_SSL`, ...), so answers can
advertise the endpoint of that same listener.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState


@dataclass(slots=True)
class RequestContext:
    state: BrokerState
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"
