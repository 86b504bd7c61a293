"""DeleteAcls (key 31), versions 0-3: remove the ACL bindings each filter matches, durably.

Authorizes ALTER on the cluster (the authorization table; CLUSTER_AUTHORIZATION_FAILED). Without an
authorizer every filter answers SECURITY_DISABLED, as Kafka's. A filter that can match nothing sensible
answers INVALID_REQUEST in its own result. Each result lists the bindings its filter removed.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.acls import AclFilter, wire_filter
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import DENIED_ACL, cluster_only
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)


def _refused(request: DeleteAclsRequest) -> DeleteAclsResponse:
    """Without ALTER on the cluster: every filter refused."""
    return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(**DENIED_ACL) for _ in request.filters])


@handler(ApiKey.DELETE_ACLS, versions=(0, 3), authorize=cluster_only(Op.ALTER, _refused))
def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    authorizer = ctx.state.authorizer
    if authorizer is None:
        return DeleteAclsResponse(filter_results=[
            DeleteAclsFilterResult(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured.")
            for _ in request.filters])
    filters = [wire_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                           f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in request.filters]
    usable: list[AclFilter] = [f for f in filters if f.problem() is None]
    matched = iter(authorizer.delete(usable))  # written to disk before the answer
    results: list[DeleteAclsFilterResult] = []
    for f in filters:
        problem = f.problem()
        if problem is not None:
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem))
            continue
        results.append(DeleteAclsFilterResult(matching_acls=[
            DeleteAclsMatchingAcl(resource_type=int(b.resource_type), resource_name=b.resource_name,
                                  pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
                                  operation=int(b.operation), permission_type=int(b.permission))
            for b in next(matched)]))
    return DeleteAclsResponse(filter_results=results)
