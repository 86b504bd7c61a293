"""The security pages' reads: ACL bindings, SCRAM users and client quotas, each through its Kafka API.

Called on the event loop by the console's router (`admin_routes`); each read is one request to the
broker's own handler as the console user (`local_client`), so it shows what that principal may see:

| read | Kafka API | authorizes |
| --- | --- | --- |
| `acls` | DescribeAcls | DESCRIBE on the CLUSTER |
| `users` | DescribeUserScramCredentials | DESCRIBE on the CLUSTER |
| `quotas` | DescribeClientQuotas | DESCRIBE_CONFIGS on the CLUSTER |

A refusal is the HTTP `403` of `reads.refused`, with Kafka's error name. No password, salt or key ever
leaves the broker: the users read lists names, mechanisms and iteration counts only.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.reads import refused
from pybroker.protocol.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_acls import DescribeAclsRequest
from pybroker.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from pybroker.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from pybroker.protocol.scram_mechanisms import BY_TYPE

ACL_VERSION = 3
ACL_COLUMNS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


def code_name(enum: Any, code: int) -> str:
    return str(enum(code).name) if code in enum._value2member_map_ else str(code)


def acl_row(resource_type: int, name: str, pattern: int, principal: str, host: str, op: int,
            permission: int) -> dict[str, Any]:
    return {"resource_type": code_name(ResourceType, resource_type), "resource_name": name,
            "pattern_type": code_name(PatternType, pattern), "principal": principal, "host": host,
            "operation": code_name(AclOperation, op), "permission": code_name(AclPermissionType, permission)}


async def acls(client: LocalClient) -> dict[str, Any]:
    """Every binding (`enabled` false, and none, when the broker runs no authorizer)."""
    response = await client.call(DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
        principal_filter=None, host_filter=None, operation=AclOperation.ANY, permission_type=AclPermissionType.ANY),
        ACL_VERSION)
    if response.error_code == ErrorCode.SECURITY_DISABLED:
        return {"enabled": False, "acls": []}
    if response.error_code:
        raise refused(response.error_code, "ACLs", response.error_message)
    rows = [acl_row(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                    a.permission_type) for r in response.resources for a in r.acls]
    return {"enabled": True, "acls": sorted(rows, key=lambda row: [row[c] for c in ACL_COLUMNS])}


async def users(client: LocalClient) -> list[dict[str, Any]]:
    """One row per SCRAM user: its mechanisms and their iteration counts (never a salt or a key)."""
    response = await client.call(DescribeUserScramCredentialsRequest(users=None))
    if response.error_code:
        raise refused(response.error_code, "SCRAM users", response.error_message)
    rows = []
    for result in sorted(response.results, key=lambda r: r.user):
        if result.error_code:
            raise refused(result.error_code, f"user {result.user}", result.error_message)
        rows.append({"user": result.user, "credentials": [
            {"mechanism": spec.name if (spec := BY_TYPE.get(info.mechanism)) else f"unknown({info.mechanism})",
             "iterations": info.iterations} for info in result.credential_infos]})
    return rows


async def quotas(client: LocalClient) -> list[dict[str, Any]]:
    """Every quota entity with its values; an entity name of None is that type's default."""
    response = await client.call(DescribeClientQuotasRequest(components=[], strict=False))
    if response.error_code:
        raise refused(response.error_code, "client quotas", response.error_message)
    rows = []
    for entry in response.entries or []:
        entity = [{"type": e.entity_type, "name": e.entity_name} for e in entry.entity]
        rows.append({"entity": entity, "values": {v.key: v.value for v in sorted(entry.values, key=lambda v: v.key)}})
    return sorted(rows, key=lambda r: [(e["type"], e["name"] or "") for e in r["entity"]])
