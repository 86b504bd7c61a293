"""The console's one way to read and change the broker: the Kafka APIs' own handlers, called in process.

Why not a socket to one of the broker's listeners, like the admin CLI? The console runs inside the broker,
and a listener may be TLS with client certificates or SASL: connecting to itself would need the console to
hold client keys and passwords it has no business keeping. Why not call storage directly? Then every rule
the Kafka APIs enforce (topic name and config validation, partition caps, auto-creation, the produce
validator, fsync before acks=all answers, the group coordinator's generation checks) would have to be
repeated, and would drift. So each console action builds the very request object a Kafka client would
send and hands it to the registered handler through `authorization.call`, the same entry point a
connection uses: the ACL table sees the console user's principal (`User:<name>`, or `User:ANONYMOUS` when
the broker has no authentication), and the answer is the same response object a client would decode.

What a console request skips, compared with a wire request: the frame codec (the objects are built, not
decoded), the request metrics, and client quotas (the console is an operator's tool; its reads are
bounded by the caps in `params`).
"""

from __future__ import annotations

import inspect
import itertools
from typing import TYPE_CHECKING, Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import REGISTRY, Waiting, load_handlers
from pybroker.broker.security import authorization

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

CLIENT_ID = "pybroker-console"


class ConsoleCallError(Exception):
    """The broker does not serve the API at the version the console needs (a programming error, said once)."""


class LocalClient:
    """Kafka requests as `principal`, from `peer` (the HTTP client's address, for host-based ACLs)."""

    _ids = itertools.count(1)

    def __init__(self, state: BrokerState, principal: str = "User:ANONYMOUS", peer: str = "127.0.0.1:0") -> None:
        self.state = state
        self.principal = principal
        self.peer = peer
        listeners = list(state.advertised) or ["PLAINTEXT"]
        self.listener = listeners[0]

    async def call(self, request: Any, version: int | None = None) -> Any:
        """The handler's answer to `request` at `version` (default: the highest served), awaited to the end."""
        if not REGISTRY:
            load_handlers()
        api_key = type(request).API_KEY
        spec = REGISTRY.get(api_key)
        chosen = spec.max_version if spec is not None and version is None else version
        if spec is None or chosen is None or not spec.serves(chosen):
            raise ConsoleCallError(f"api {api_key} v{version} is not served")
        ctx = RequestContext(self.state, api_key, chosen, next(self._ids), CLIENT_ID, self.peer,
                             self.principal, self.listener)
        result = authorization.call(spec, ctx, request)
        while True:
            if isinstance(result, Waiting):
                result = await result.awaitable
            elif inspect.isawaitable(result):
                result = await result
            else:
                return result
