"""ApiVersions (key 18), versions 0-4.

The list is computed from the handler registry, so it always says exactly what we serve. The response
header is always v0 (see `pybroker.protocol.frames`); an unsupported version gets Kafka's v0 fallback
answer from the connection layer before it reaches this handler.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, supported_versions
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse


@handler(ApiKey.API_VERSIONS, versions=(0, 4))
def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in supported_versions()],
        throttle_time_ms=0,
    )
