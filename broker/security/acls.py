"""Kafka's ACL model and StandardAuthorizer's rules, pure and table-driven.

An ACL binding says: `principal` from `host` is ALLOWed (or DENYed) `operation` on the resources that a
pattern (resource type, name, LITERAL or PREFIXED) selects. The codes are Kafka's (`AclOperation`,
`ResourceType`, `PatternType`, `AclPermissionType`), so they travel over the wire unchanged.

A request for (principal, host, operation, resource) is decided as StandardAuthorizer decides it:

1. a super user (`super.users`) is always allowed;
2. the ACLs whose pattern selects the resource are those on the exact name (LITERAL), on the wildcard
   name `*` (LITERAL), and PREFIXED ones whose name begins the resource's name;
3. of those, an ACL applies when its principal is the caller or `User:*`, its host is the caller's or `*`,
   and its operation is the one asked, ALL, or (for an ALLOW only) one that implies it: READ, WRITE,
   DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
4. any applying DENY wins; else any applying ALLOW allows;
5. else, when no ACL at all selects the resource, `allow.everyone.if.no.acl.found` decides; when some
   ACL selects it (for someone else, say), the answer is DENIED.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from pybroker.protocol.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType

_E = TypeVar("_E", bound=IntEnum)


#: the resource name of the cluster, and the wildcard name / principal / host
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

#: the resource types an ACL may be stored for (DELEGATION_TOKEN is not served)
BINDABLE_RESOURCE_TYPES = frozenset({ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                     ResourceType.TRANSACTIONAL_ID, ResourceType.USER})

#: an ALLOW on the key also allows each operation of its value (Kafka's implied operations)
IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.READ: frozenset({AclOperation.DESCRIBE}),
    AclOperation.WRITE: frozenset({AclOperation.DESCRIBE}),
    AclOperation.DELETE: frozenset({AclOperation.DESCRIBE}),
    AclOperation.ALTER: frozenset({AclOperation.DESCRIBE}),
    AclOperation.ALTER_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS}),
}

#: the operations that mean something on each resource type (Kafka's `authorized_operations` bit sets)
OPERATIONS_OF: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                         AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One stored ACL: a concrete pattern (LITERAL or PREFIXED) and a concrete entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def selects(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL's pattern covers the resource (the wildcard name covers every one)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def applies(self, principal: str, host: str, operation: AclOperation) -> bool:
        """Whether this ACL speaks about `principal` from `host` doing `operation`."""
        if self.principal not in (principal, WILDCARD_PRINCIPAL) or self.host not in (host, WILDCARD):
            return False
        if self.operation in (operation, AclOperation.ALL):
            return True
        return self.permission == AclPermissionType.ALLOW and operation in IMPLIES.get(self.operation, ())


def binding_problem(b: AclBinding) -> str | None:
    """Why a binding cannot be created (Kafka's CreateAcls checks), or None."""
    if b.resource_type not in BINDABLE_RESOURCE_TYPES:
        return f"resource type {b.resource_type.name} cannot have ACLs"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"pattern type {b.pattern_type.name} cannot be stored"
    if b.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return f"operation {b.operation.name} cannot be stored"
    if b.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"permission type {b.permission.name} cannot be stored"
    if not b.resource_name:
        return "the resource name must not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME}"
    if ":" not in b.principal or b.principal.startswith(":") or b.principal.endswith(":"):
        return f"principal {b.principal!r} is not of the form Type:name"
    if not b.host:
        return "the host must not be empty (use * for any host)"
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: ANY fields match everything; None strings match any value.

    Pattern type ANY matches stored LITERAL and PREFIXED bindings by name equality; MATCH matches the
    bindings that would select a resource of that name (exact, wildcard `*`, and prefixes of it).
    """

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.LITERAL
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if not self._name_matches(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation not in (AclOperation.ANY, b.operation):
            return False
        return self.permission in (AclPermissionType.ANY, b.permission)

    def _name_matches(self, b: AclBinding) -> bool:
        pattern, name = self.pattern_type, self.resource_name
        if pattern == PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name in (name, WILDCARD)
            return name.startswith(b.resource_name)
        if pattern not in (PatternType.ANY, b.pattern_type):
            return False
        return name is None or name == b.resource_name

    def problem(self) -> str | None:
        """Why the filter can match nothing sensible (Kafka answers INVALID_REQUEST), or None."""
        if self.resource_type == ResourceType.UNKNOWN:
            return "unknown resource type"
        if self.pattern_type == PatternType.UNKNOWN:
            return "unknown pattern type"
        if self.operation == AclOperation.UNKNOWN:
            return "unknown operation"
        if self.permission == AclPermissionType.UNKNOWN:
            return "unknown permission type"
        return None


@dataclass(frozen=True, slots=True)
class Decision:
    """An authorization answer, with the ACL that decided it (None: super user or the no-ACL default)."""

    allowed: bool
    acl: AclBinding | None = None


def decide(acls: Iterable[AclBinding], principal: str, host: str, operation: AclOperation,
           resource_type: ResourceType, name: str, *, super_users: frozenset[str] = frozenset(),
           allow_if_no_acl: bool = False) -> Decision:
    """StandardAuthorizer's answer for one action (see the module docstring for the rules)."""
    if principal in super_users:
        return Decision(True)
    allow: AclBinding | None = None
    selected = False
    for acl in acls:
        if not acl.selects(resource_type, name):
            continue
        selected = True
        if acl.applies(principal, host, operation):
            if acl.permission == AclPermissionType.DENY:
                return Decision(False, acl)
            allow = acl
    if allow is not None:
        return Decision(True, allow)
    return Decision(allow_if_no_acl and not selected)


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users` is Kafka's semicolon-separated list of principals (`User:alice;User:bob`)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


def code_of(cls: type[_E], value: int) -> _E:
    """The enum member for a wire code; UNKNOWN for a code Kafka does not define (a hostile client's 99)."""
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # every one of these enums has UNKNOWN = 0


def wire_filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None,
                host: str | None, operation: int, permission: int) -> AclFilter:
    """A DescribeAcls / DeleteAcls filter from its wire fields."""
    return AclFilter(code_of(ResourceType, resource_type), name, code_of(PatternType, pattern_type), principal,
                     host, code_of(AclOperation, operation), code_of(AclPermissionType, permission))
