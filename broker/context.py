"""What a handler knows about the request it serves, besides the request itself."""

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
