"""ApiVersions (key 18), versions 0-4.

The list is computed from the handler registry, so it always says exactly what we serve. The response
header is always v0 (see `pybroker.protocol.frame_codec`); an unsupported version gets Kafka's v0 fallback
answer from the connection layer before it reaches this handler. v3+ also carry the cluster features
(`pybroker.broker.features`: `transaction.version`, `metadata.version`) as tagged fields; v4 may list
a supported feature whose minimum is 0, v3 may not. The client software name and version a v3+ request
gives are remembered for client telemetry's `match` selectors. A version whose feature is off by config is
not advertised (`OFF_UNLESS`: InitProducerId v6 is two-phase commit, KIP-939; Kafka 4.4 too lists it only
when enabled), though a client that sends it is still answered. Authorizes nothing: every client may ask.
"""

from __future__ import annotations

from pybroker.broker import features
from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, supported_versions
from pybroker.broker.security.authorization_check import anyone
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse

# api key -> (the first version that needs the feature, the config that switches it on)
OFF_UNLESS: dict[int, tuple[int, str]] = {
    ApiKey.INIT_PRODUCER_ID: (6, "transaction.two.phase.commit.enable"),
}


def advertised(ctx: RequestContext) -> list[tuple[int, int, int]]:
    """The served versions, less those whose feature the config leaves off."""
    out = []
    for key, low, high in supported_versions():
        first_off, config = OFF_UNLESS.get(key, (high + 1, ""))
        if first_off <= high and not ctx.state.config.get(config):
            high = first_off - 1
        out.append((key, low, high))
    return out


@handler(ApiKey.API_VERSIONS, versions=(0, 4), authorize=anyone)
def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    served = advertised(ctx)
    response = ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in served],
        throttle_time_ms=0,
    )
    if ctx.api_version >= 3:  # the features are tagged fields: v0-2 have no place for them
        ctx.state.client_metrics.note_software(ctx.peer, request.client_software_name,
                                               request.client_software_version)
        response.supported_features = features.supported_feature_keys(ctx.api_version)
        response.finalized_features_epoch = features.FINALIZED_FEATURES_EPOCH
        response.finalized_features = features.finalized_feature_keys({k: hi for k, _, hi in served})
    return response
