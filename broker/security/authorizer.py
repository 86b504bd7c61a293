"""The broker's authorizer: Kafka's StandardAuthorizer over the durable ACL store.

Off unless `authorizer.class.name` names one of Kafka's authorizer classes; then every served API asks
it (through `broker/security/authorization.py`) before acting. The rules themselves are pure
(`acls.decide`); this object holds the bindings (indexed by resource type), the `super.users` and the
`allow.everyone.if.no.acl.found` default, writes every change to disk before answering, and reports
each denial as one rate-limited log line and a metric.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pybroker.broker.loggers.limiter import RateLimitedLog
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.metrics.authorization import ACLS, AUTHORIZATION_DENIED
from pybroker.broker.security.acl_store import AclStore
from pybroker.broker.security.acls import (
    WILDCARD,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    ResourceType,
    decide,
    parse_super_users,
)

log = get_logger("pybroker.authorizer")

#: `authorizer.class.name` values that switch the ACL authorizer on (Kafka's KRaft and ZooKeeper names)
AUTHORIZER_CLASSES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
})


def authorizer_enabled(config: Any) -> bool:
    return str(config.get("authorizer.class.name") or "").strip() in AUTHORIZER_CLASSES


def host_of(peer: str) -> str:
    """The client's address from a connection's `host:port` peer (IPv6 addresses keep their colons)."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return host.strip("[]")


class Authorizer:
    def __init__(self, log_dir: Path, super_users: str | None, allow_if_no_acl: bool,
                 denial_log: RateLimitedLog | None = None) -> None:
        self.store = AclStore(log_dir)
        self.super_users = parse_super_users(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.denials = denial_log or RateLimitedLog(log)
        self._by_type: dict[ResourceType, set[AclBinding]] = {}
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}

    @classmethod
    def from_config(cls, config: Any, denial_log: RateLimitedLog | None = None) -> Authorizer | None:
        """The authorizer `config` asks for, or None when authorization is off.

        `denial_log` is the broker's limiter of client-caused warnings (its sweeper writes the
        "similar warnings suppressed" summaries), so a client refused in a loop cannot flood the log.
        """
        if not authorizer_enabled(config):
            return None
        return cls(Path(config.log_dirs[0]), config.get("super.users"),
                   bool(config.get("allow.everyone.if.no.acl.found")), denial_log)

    def load(self) -> None:
        self._by_type = {}
        for binding in self.store.load():
            self._by_type.setdefault(binding.resource_type, set()).add(binding)
        self._index()
        ACLS.set(self.count())
        log.info("authorizer ready", acls=self.count(), super_users=sorted(self.super_users),
                 allow_everyone_if_no_acl_found=self.allow_if_no_acl, file=str(self.store.path))

    # -- decisions -----------------------------------------------------------------------------
    def allowed(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str, *, log_denial: bool = True, api: str | None = None) -> bool:
        """Whether `principal` from `host` may do `operation` on the resource; a denial is logged."""
        decision = decide(self._candidates(resource_type, name), principal, host, operation, resource_type,
                          name, super_users=self.super_users, allow_if_no_acl=self.allow_if_no_acl)
        if not decision.allowed and log_denial:
            AUTHORIZATION_DENIED.labels(operation.name, resource_type.name).inc()
            self.denials.warning("authorization denied", "authorization denied", principal=principal,
                                 operation=operation.name, resource_type=resource_type.name,
                                 resource_name=name, host=host, api=api)
        return decision.allowed

    def _candidates(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """The bindings that may select the resource: its literal name, the wildcard, and the prefixes
        (an index, so a check costs what applies to the resource, not every ACL of its type)."""
        literal = self._literal
        found = [*literal.get((resource_type, name), ()), *literal.get((resource_type, WILDCARD), ())]
        found += [b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.resource_name)]
        return found

    # -- bindings ------------------------------------------------------------------------------
    def count(self) -> int:
        return sum(len(s) for s in self._by_type.values())

    def bindings(self) -> list[AclBinding]:
        return sorted(b for s in self._by_type.values() for b in s)

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if acl_filter.matches(b)]

    def create(self, bindings: Iterable[AclBinding]) -> None:
        """Add bindings (already checked with `binding_problem`) and write them to disk before returning."""
        self._commit(set(self.bindings()) | set(bindings))

    def delete(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches; per filter, the bindings it matched (a binding may repeat)."""
        current = set(self.bindings())
        matched = [[b for b in sorted(current) if f.matches(b)] for f in filters]
        gone = {b for group in matched for b in group}
        if gone:
            self._commit(current - gone)
        return matched

    def _commit(self, bindings: set[AclBinding]) -> None:
        self.store.save(bindings)  # durable first: a crash after answering must not lose the change
        by_type: dict[ResourceType, set[AclBinding]] = {}
        for binding in bindings:
            by_type.setdefault(binding.resource_type, set()).add(binding)
        self._by_type = by_type
        self._index()
        ACLS.set(self.count())

    def _index(self) -> None:
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[ResourceType, list[AclBinding]] = {}
        for binding in self.bindings():
            if binding.pattern_type == PatternType.LITERAL:
                literal.setdefault((binding.resource_type, binding.resource_name), []).append(binding)
            else:
                prefixed.setdefault(binding.resource_type, []).append(binding)
        self._literal, self._prefixed = literal, prefixed
