"""What `pybroker acls ...` asks the broker: DescribeAcls, CreateAcls and DeleteAcls, as plain rows.

Names are Kafka's (`TOPIC`, `PREFIXED`, `READ`, `ALLOW`), as `kafka-acls --list` prints them; the
codes travel as the wire defines them (`pybroker.protocol.acl_codes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pybroker.clients.admin.topics import check
from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from pybroker.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from pybroker.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from pybroker.protocol.messages.describe_acls import DescribeAclsRequest

COLUMNS = ["resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission"]


@dataclass(frozen=True, slots=True)
class Selection:
    """An ACL filter in Kafka's terms: None and ANY match everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY


def _row(resource_type: int, name: str, pattern: int, principal: str, host: str, op: int,
         permission: int) -> dict[str, Any]:
    return {"resource_type": _name(ResourceType, resource_type), "resource_name": name,
            "pattern_type": _name(PatternType, pattern), "principal": principal, "host": host,
            "operation": _name(AclOperation, op), "permission": _name(AclPermissionType, permission)}


def _name(enum: Any, code: int) -> str:
    return str(enum(code).name) if code in enum._value2member_map_ else str(code)


def list_acls(client: WireClient, sel: Selection) -> list[dict[str, Any]]:
    response = client.call(DescribeAclsRequest(
        resource_type_filter=sel.resource_type, resource_name_filter=sel.resource_name,
        pattern_type_filter=sel.pattern_type, principal_filter=sel.principal, host_filter=sel.host,
        operation=sel.operation, permission_type=sel.permission), max_version=3)
    check(response.error_code, response.error_message, "DescribeAcls")
    rows = [_row(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                 a.permission_type) for r in response.resources for a in r.acls]
    return sorted(rows, key=lambda row: [row[c] for c in COLUMNS])


def add_acls(client: WireClient, resource_type: ResourceType, name: str, pattern: PatternType,
             principals: list[str], hosts: list[str], operations: list[AclOperation],
             permission: AclPermissionType) -> list[dict[str, Any]]:
    """One binding per principal x host x operation, as kafka-acls --add makes them."""
    wanted = [(p, h, op) for p in principals for h in hosts for op in operations]
    response = client.call(CreateAclsRequest(creations=[
        AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern, principal=p,
                    host=h, operation=op, permission_type=permission) for p, h, op in wanted]), max_version=3)
    rows = []
    for (p, h, op), result in zip(wanted, response.results, strict=False):
        check(result.error_code, result.error_message, f"CreateAcls {p} {op.name} {name}")
        rows.append(_row(resource_type, name, pattern, p, h, op, permission))
    if len(response.results) != len(wanted):
        raise WireError(f"CreateAcls: {len(response.results)} answers for {len(wanted)} ACLs")
    return rows


def remove_acls(client: WireClient, sel: Selection) -> list[dict[str, Any]]:
    response = client.call(DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=sel.resource_type, resource_name_filter=sel.resource_name,
        pattern_type_filter=sel.pattern_type, principal_filter=sel.principal, host_filter=sel.host,
        operation=sel.operation, permission_type=sel.permission)]), max_version=3)
    rows = []
    for result in response.filter_results:
        check(result.error_code, result.error_message, "DeleteAcls")
        for m in result.matching_acls:
            check(m.error_code, m.error_message, "DeleteAcls")
            rows.append(_row(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                             m.permission_type))
    return sorted(rows, key=lambda row: [row[c] for c in COLUMNS])
