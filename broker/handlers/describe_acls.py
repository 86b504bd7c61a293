"""DescribeAcls (key 29), versions 0-3: the ACL bindings one filter matches, grouped by resource pattern.

Authorizes DESCRIBE on the cluster (the authorization table; CLUSTER_AUTHORIZATION_FAILED). Without an
authorizer the answer is SECURITY_DISABLED, as Kafka's. A filter that can match nothing sensible (an
UNKNOWN type, pattern, operation or permission) answers INVALID_REQUEST. v0 filters are LITERAL.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.acls import wire_filter
from pybroker.broker.security.authorization_check import CLUSTER_DENIED, Op
from pybroker.broker.security.authorization_cluster import cluster_only
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)


def _refused(request: DescribeAclsRequest) -> DescribeAclsResponse:
    """Without DESCRIBE on the cluster."""
    return DescribeAclsResponse(error_code=CLUSTER_DENIED, error_message="not authorized to describe ACLs")


@handler(ApiKey.DESCRIBE_ACLS, versions=(0, 3), authorize=cluster_only(Op.DESCRIBE, _refused))
def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = ctx.state.authorizer
    if authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message="No Authorizer is configured on the broker")
    acl_filter = wire_filter(request.resource_type_filter, request.resource_name_filter,
                             request.pattern_type_filter, request.principal_filter, request.host_filter,
                             request.operation, request.permission_type)
    problem = acl_filter.problem()
    if problem is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
    resources: dict[tuple[int, str, int], DescribeAclsResource] = {}
    for b in authorizer.describe(acl_filter):
        key = (int(b.resource_type), b.resource_name, int(b.pattern_type))
        resource = resources.get(key)
        if resource is None:
            resource = resources[key] = DescribeAclsResource(resource_type=key[0], resource_name=key[1],
                                                             pattern_type=key[2])
        resource.acls.append(AclDescription(principal=b.principal, host=b.host, operation=int(b.operation),
                                            permission_type=int(b.permission)))
    return DescribeAclsResponse(resources=list(resources.values()))
