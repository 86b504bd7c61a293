"""CreateAcls (key 30), versions 0-3: add ACL bindings to the authorizer, durably.

Authorizes ALTER on the cluster (the authorization table; CLUSTER_AUTHORIZATION_FAILED). Without an
authorizer every creation answers SECURITY_DISABLED, as Kafka does. A binding Kafka would refuse
(unknown or ANY type, pattern, operation or permission; an empty name; a principal not `Type:name`) gets
INVALID_REQUEST in its own result and the others are created. v0 bindings are LITERAL.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_problem,
    code_of,
)
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import DENIED_ACL, cluster_only
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse


def _refused(request: CreateAclsRequest) -> CreateAclsResponse:
    """Without ALTER on the cluster: every creation refused."""
    return CreateAclsResponse(results=[AclCreationResult(**DENIED_ACL) for _ in request.creations])


@handler(ApiKey.CREATE_ACLS, versions=(0, 3), authorize=cluster_only(Op.ALTER, _refused))
def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    authorizer = ctx.state.authorizer
    if authorizer is None:
        return CreateAclsResponse(results=[
            AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured.")
            for _ in request.creations])
    results: list[AclCreationResult] = []
    valid: list[AclBinding] = []
    for c in request.creations:
        binding = AclBinding(code_of(ResourceType, c.resource_type), c.resource_name,
                             code_of(PatternType, c.resource_pattern_type), c.principal, c.host,
                             code_of(AclOperation, c.operation), code_of(AclPermissionType, c.permission_type))
        problem = binding_problem(binding)
        if problem is not None:
            results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem))
        else:
            valid.append(binding)
            results.append(AclCreationResult(error_code=ErrorCode.NONE))
    if valid:
        # written to disk before the answer (ACL changes are rare admin actions: a short fsync on the loop)
        authorizer.create(valid)
    return CreateAclsResponse(results=results)
