"""The pieces every authorization rule uses: `Check` (one request's questions to the authorizer), the
resource and error shorthands, `anyone` (the rule of an API that needs no permission), and how a partly
allowed request's answer is completed (`then`, a merge that appends the refused entries). The rules are in
the other `authorization_*` modules; each handler module picks its own when it registers. All of it runs on
the event loop, inside `authorization.call`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pybroker.broker.dispatch import Waiting
from pybroker.broker.security.acls import (
    CLUSTER_NAME,
    OPERATIONS_OF,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pybroker.broker.security.authorizer import Authorizer
from pybroker.protocol.errors import ErrorCode

Merge = Callable[[Any], Any]
Outcome = Any  # None (allowed) | a response (refused) | a Merge (partly allowed)

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = AclOperation
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
#: DescribeConfigs / AlterConfigs resource types: topic, broker, broker logger, client metrics
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS = 2, 4, 8, 16
UNSET_OPERATIONS = -(2**31)
FIRST_TOPIC_ID_FETCH_VERSION = 13


@dataclass(slots=True)
class Check:
    """One request's questions to the authorizer: who asks, from where."""

    authorizer: Authorizer
    principal: str
    host: str
    version: int
    state: Any
    api: str | None = None  # named in denial log lines

    def ok(self, operation: AclOperation, resource_type: ResourceType, name: str, *, quiet: bool = False) -> bool:
        return self.authorizer.allowed(self.principal, self.host, operation, resource_type, name,
                                       log_denial=not quiet, api=self.api)

    def cluster(self, operation: AclOperation, *, quiet: bool = False) -> bool:
        return self.ok(operation, CLUSTER, CLUSTER_NAME, quiet=quiet)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """Kafka's `authorized_operations` bit set: bit n set when operation code n is allowed."""
        return sum(1 << int(op) for op in OPERATIONS_OF[resource_type]
                   if self.ok(op, resource_type, name, quiet=True))

    def may_write_some_topic(self) -> bool:
        """Kafka's `authorizeByResourceType(WRITE, TOPIC)`: some ALLOW for WRITE (or ALL) on a topic
        pattern applies to us and no DENY applies to the same pattern or to every topic."""
        if self.principal in self.authorizer.super_users:
            return True
        acls = [b for b in self.authorizer.bindings() if b.resource_type == TOPIC]

        def applies(b: AclBinding) -> bool:
            return b.principal in (self.principal, "User:*") and b.host in (self.host, "*") \
                and b.operation in (Op.WRITE, Op.ALL)

        denied = {(b.pattern_type, b.resource_name) for b in acls
                  if b.permission == AclPermissionType.DENY and applies(b)}
        if (PatternType.LITERAL, "*") in denied or (PatternType.PREFIXED, "") in denied:
            return False
        if any(b.permission == AclPermissionType.ALLOW and applies(b)
               and (b.pattern_type, b.resource_name) not in denied for b in acls):
            return True
        return self.authorizer.allow_if_no_acl and not acls


def anyone(check: Check, request: Any) -> Outcome:
    """The rule of an API every client may use (ApiVersions, SASL, client telemetry): nothing to check.
    `authorization.call` recognises it and calls the handler without asking the authorizer."""
    return None


def then(result: Any, merge: Merge) -> Any:
    """Apply `merge` to a handler's answer, whether it is ready, merely waiting, or still working."""
    if result is None:
        return None  # acks=0: nothing is answered
    if isinstance(result, Waiting):
        return Waiting(_merged(result.awaitable, merge))
    if inspect.isawaitable(result):
        return _merged(result, merge)
    return merge(result)


async def _merged(awaitable: Awaitable[Any], merge: Merge) -> Any:
    result = await awaitable
    if isinstance(result, Waiting):  # work that ended in a pure wait
        return Waiting(_merged(result.awaitable, merge))
    return None if result is None else merge(result)


def appending(attr: str, extra: list[Any]) -> Merge:
    def merge(response: Any) -> Any:
        getattr(response, attr).extend(extra)
        return response
    return merge


def split_by(items: list[Any], allowed: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    kept: list[Any] = []
    denied: list[Any] = []
    for item in items:
        (kept if allowed(item) else denied).append(item)
    return kept, denied


# -- topic -> partitions APIs: deny per topic, answer each of its partitions ----------------------
def per_topic(check: Check, request: Any, req_topics: str, op: AclOperation,
               denied_entry: Callable[[Any], Any], resp_topics: str,
               name_of: Callable[[Any], str | None] = lambda t: t.name,
               refused: set[str] | frozenset[str] = frozenset()) -> Merge | None:
    """Keep the topics `op` is allowed on (and not `refused` already); answer the others with `denied_entry`."""
    def allowed(t: Any) -> bool:
        name = name_of(t)
        return name is None or (name not in refused and check.ok(op, TOPIC, name))

    topics = getattr(request, req_topics)
    kept, denied = split_by(topics, allowed)
    if not denied:
        return None
    setattr(request, req_topics, kept)
    return appending(resp_topics, [denied_entry(t) for t in denied])


