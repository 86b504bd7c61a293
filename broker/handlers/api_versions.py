"""ApiVersions (key 18), versions 0-4.

The list is computed from the handler registry, so it always says exactly what we serve. The response
header is always v0 (see `pybroker.protocol.frames`); an unsupported version gets Kafka's v0 fallback
answer from the connection layer before it reaches this handler.

v3+ also lists Kafka's feature flags: `transaction.version` supported 0-2 and finalized at 2, so Kafka 4
clients use transactions v2 (KIP-890: Produce v12 adds partitions to the transaction itself, EndTxn v5
bumps the epoch at every end); older clients ignore the flags and keep to the v1 protocol, also served.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, supported_versions
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

#: feature -> (lowest supported level, highest supported level = the finalized level)
FEATURES: dict[str, tuple[int, int]] = {"transaction.version": (0, 2)}
#: the epoch of the finalized levels (Kafka's is a metadata offset; ours never change while running)
FINALIZED_FEATURES_EPOCH = 1


@handler(ApiKey.API_VERSIONS, versions=(0, 4))
def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in supported_versions()],
        throttle_time_ms=0,
        supported_features=[SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
                            for name, (lo, hi) in FEATURES.items()],
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=[FinalizedFeatureKey(name=name, max_version_level=hi, min_version_level=hi)
                            for name, (_, hi) in FEATURES.items()],
    )
