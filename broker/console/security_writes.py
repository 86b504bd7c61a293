"""The security pages' changes: ACL bindings, SCRAM users and client quotas, each through its Kafka API.

Called on the event loop by the console's router (`admin_routes`), after its CSRF guard (every change is
a POST with the session token; the page asks for a confirmation before each removal). Each change is the
request an admin client sends, handed to the broker's own handler as the console user, so the broker's
validation, caps, durability and ACLs apply unchanged:

| change | Kafka API | authorizes |
| --- | --- | --- |
| `create_acl`, `delete_acl` | CreateAcls, DeleteAcls | ALTER on the CLUSTER |
| `upsert_user`, `delete_user` | AlterUserScramCredentials | ALTER on the CLUSTER |
| `alter_quota` | AlterClientQuotas | ALTER_CONFIGS on the CLUSTER |

Passwords: a new user's password is salted and hashed here (a fresh random salt, RFC 5802's Hi, off the
event loop), so only the salted password reaches the credential store, as `kafka-configs --add-config
'SCRAM-SHA-512=[password=...]'` sends it. The password is never logged, never put in an answer or an
error message, and never compared here (the login check in `auth` is the only comparison, constant-time).
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from pybroker.broker.console import params as p
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.reads import refused
from pybroker.broker.console.security_reads import ACL_VERSION, acl_row
from pybroker.protocol.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from pybroker.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasRequestEntityData,
    AlterClientQuotasRequestEntryData,
    OpData,
)
from pybroker.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from pybroker.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from pybroker.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from pybroker.protocol.scram_mechanisms import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS

#: what a binding made here may name (ANY, MATCH and UNKNOWN are filters' words, not a binding's)
RESOURCE_TYPES = tuple(t.name for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))
PATTERN_TYPES = (PatternType.LITERAL.name, PatternType.PREFIXED.name)
OPERATIONS = tuple(o.name for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY))
PERMISSIONS = (AclPermissionType.ALLOW.name, AclPermissionType.DENY.name)
MAX_PASSWORD = 1024
SALT_BYTES = 32
QUOTA_ENTITY_TYPES = ("user", "client-id", "ip")
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
              "connection_creation_rate")
#: a quota entity names at most a user and a client id
MAX_QUOTA_COMPONENTS = 2


def _binding(body: dict[str, Any]) -> tuple[ResourceType, str, PatternType, str, str, AclOperation,
                                             AclPermissionType]:
    resource_type = ResourceType[p.choice(body, "resource_type", RESOURCE_TYPES, "TOPIC")]
    name = p.text(body, "resource_name", max_len=p.MAX_NAME)
    pattern = PatternType[p.choice(body, "pattern_type", PATTERN_TYPES, "LITERAL")]
    principal = p.text(body, "principal", max_len=p.MAX_NAME)
    if ":" not in principal:
        raise p.bad("principal must be TYPE:NAME, such as User:alice")
    host = p.text(body, "host", max_len=p.MAX_NAME, default="*")
    operation = AclOperation[p.choice(body, "operation", OPERATIONS, "READ")]
    permission = AclPermissionType[p.choice(body, "permission", PERMISSIONS, "ALLOW")]
    return resource_type, name, pattern, principal, host, operation, permission


async def create_acl(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    """One binding (CreateAcls; ALTER on the CLUSTER)."""
    resource_type, name, pattern, principal, host, operation, permission = _binding(body)
    response = await client.call(CreateAclsRequest(creations=[AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=pattern, principal=principal,
        host=host, operation=operation, permission_type=permission)]), ACL_VERSION)
    result = response.results[0]
    if result.error_code:
        raise refused(result.error_code, "create ACL", result.error_message)
    return acl_row(resource_type, name, pattern, principal, host, operation, permission)


async def delete_acl(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    """Exactly one binding, every field given (DeleteAcls; ALTER on the CLUSTER): never a wildcard filter,
    so a slip in the page cannot remove more than the row it was on."""
    resource_type, name, pattern, principal, host, operation, permission = _binding(body)
    response = await client.call(DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=host, operation=operation, permission_type=permission)]),
        ACL_VERSION)
    result = response.filter_results[0]
    if result.error_code:
        raise refused(result.error_code, "delete ACL", result.error_message)
    for match in result.matching_acls:
        if match.error_code:
            raise refused(match.error_code, "delete ACL", match.error_message)
    return {"deleted": len(result.matching_acls)}


def _mechanism(body: dict[str, Any]) -> Any:
    return MECHANISMS[p.choice(body, "mechanism", tuple(MECHANISMS), "SCRAM-SHA-512")]


async def upsert_user(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    """Add a SCRAM user or change its password (AlterUserScramCredentials; ALTER on the CLUSTER)."""
    name = p.text(body, "user", max_len=p.MAX_NAME)
    mechanism = _mechanism(body)
    iterations = p.integer(body, "iterations", MIN_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS)
    password = p.text(body, "password", max_len=MAX_PASSWORD)
    salt = secrets.token_bytes(SALT_BYTES)
    salted = await asyncio.to_thread(mechanism.salted_password, password, salt, iterations)
    del password
    response = await client.call(AlterUserScramCredentialsRequest(upsertions=[ScramCredentialUpsertion(
        name=name, mechanism=mechanism.type_id, iterations=iterations, salt=salt, salted_password=salted)]))
    _check_users(response)
    return {"user": name, "mechanism": mechanism.name, "iterations": iterations}


async def delete_user(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    """Remove one mechanism's credential of a user (AlterUserScramCredentials; ALTER on the CLUSTER)."""
    name = p.text(body, "user", max_len=p.MAX_NAME)
    mechanism = _mechanism(body)
    response = await client.call(AlterUserScramCredentialsRequest(deletions=[
        ScramCredentialDeletion(name=name, mechanism=mechanism.type_id)]))
    _check_users(response)
    return {"user": name, "mechanism": mechanism.name, "deleted": True}


def _check_users(response: Any) -> None:
    for result in response.results:
        if result.error_code:
            raise refused(result.error_code, f"user {result.user}", result.error_message)


def _quota_entity(body: dict[str, Any]) -> list[AlterClientQuotasRequestEntityData]:
    """`entity`: [{"type": "user", "name": "alice"}, ...]; a name of null is that type's default."""
    given = body.get("entity")
    if not isinstance(given, list) or not 1 <= len(given) <= MAX_QUOTA_COMPONENTS:
        raise p.bad(f"entity must be a list of 1 to {MAX_QUOTA_COMPONENTS} {{type, name}} objects")
    out = []
    for part in given:
        if not isinstance(part, dict):
            raise p.bad("each entity part must be an object {type, name}")
        out.append(AlterClientQuotasRequestEntityData(
            entity_type=p.choice(part, "type", QUOTA_ENTITY_TYPES, "user"),
            entity_name=p.optional_text(part, "name", max_len=p.MAX_NAME) or None))
    if len({e.entity_type for e in out}) != len(out):
        raise p.bad("each entity type may be named once")
    return out


async def alter_quota(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    """Set one quota (`value` a number) or remove it (`value` null) (AlterClientQuotas; ALTER_CONFIGS on the
    CLUSTER). The broker checks which keys an entity takes and whether the value must be whole."""
    entity = _quota_entity(body)
    key = p.choice(body, "key", QUOTA_KEYS, "producer_byte_rate")
    value = body.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise p.bad("value must be a number, or null to remove the quota")
    op = OpData(key=key, remove=True) if value is None else OpData(key=key, value=float(value), remove=False)
    response = await client.call(AlterClientQuotasRequest(entries=[
        AlterClientQuotasRequestEntryData(entity=entity, ops=[op])]))
    for entry in response.entries:
        if entry.error_code:
            raise refused(entry.error_code, "alter quota", entry.error_message)
    return {"entity": [{"type": e.entity_type, "name": e.entity_name} for e in entity], "key": key,
            "value": value, "removed": value is None}
