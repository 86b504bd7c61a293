"""The handler registry: one decorator per API; the ApiVersions answer and the authorization table come from it.

Each module in `pybroker.broker.handlers` registers its function with
`@handler(ApiKey.X, versions=(lo, hi), authorize=rule)`. `rule` is what the API must be allowed, chosen in
the handler's own module: a rule of `pybroker.broker.security.authorization_*`, or `anyone` for the APIs that
need no permission (`pybroker.broker.security.authorization` says what a rule answers and runs it).
A handler takes the request context and the decoded request and returns one of:

- the response object (the request is done);
- `waiting(awaitable)`: the request's effects are complete and only its answer waits (a produce waiting
  for fsync, a fetch long-poll, a JoinGroup waiting for the other members), so the connection may start
  its next request meanwhile;
- a bare awaitable: the request is still doing work (off the loop, say), so the connection starts
  nothing else until it completes: Kafka's rule that a connection's requests take effect in order;
- None when no response is sent (acks=0).

Because ApiVersions is computed from this registry, what we advertise cannot drift from what we serve; because
the authorization table is too, an API cannot be served without the rule it declared. Handlers register at
import (`load_handlers`, once at startup); afterwards the registry is only read, on the event loop.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.protocol.messages import REQUESTS

if TYPE_CHECKING:
    from pybroker.broker.context import RequestContext



class Waiting:
    """A handler's answer that merely waits: the request's effects are already complete."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable


def waiting(awaitable: Awaitable[Any]) -> Waiting:
    """Mark `awaitable` as a pure wait (fsync, long-poll): later requests of the connection may start."""
    return Waiting(awaitable)


HandlerResult = Any | Awaitable[Any] | Waiting | None
HandlerFn = Callable[["RequestContext", Any], HandlerResult]
#: an authorization rule: (Check, request) -> None | a response | a merge (see `broker.security.authorization`)
Rule = Callable[[Any, Any], Any]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    fn: HandlerFn
    authorize: Rule | None = None  # None: the handler declared no rule (a test fails on it)

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[int, HandlerSpec] = {}


def handler(api_key: int, versions: tuple[int, int], authorize: Rule | None = None
            ) -> Callable[[HandlerFn], HandlerFn]:
    lo, hi = versions
    request_cls = REQUESTS[int(api_key)]
    if lo < request_cls.MIN_VERSION or hi > request_cls.MAX_VERSION:
        raise ValueError(f"api {api_key}: versions {lo}-{hi} exceed the codec's "
                         f"{request_cls.MIN_VERSION}-{request_cls.MAX_VERSION}")

    def register(fn: HandlerFn) -> HandlerFn:
        if int(api_key) in REGISTRY:
            raise ValueError(f"api {api_key} registered twice")
        REGISTRY[int(api_key)] = HandlerSpec(int(api_key), lo, hi, fn, authorize)
        return fn

    return register


def load_handlers() -> dict[int, HandlerSpec]:
    """Import every handler module once, which fills the registry."""
    package = importlib.import_module("pybroker.broker.handlers")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    return REGISTRY


def supported_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every registered API, sorted by key: the ApiVersions list."""
    return [(s.api_key, s.min_version, s.max_version) for s in sorted(REGISTRY.values(), key=lambda s: s.api_key)]
