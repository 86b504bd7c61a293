"""SaslHandshake (key 17) 0-1 and SaslAuthenticate (key 36) 0-2 when they reach the handlers.

On a SASL listener the connection's SASL gate answers both before dispatch (`broker/connection.py`,
`broker/security/sasl_session.py`); what comes here is Kafka's KafkaApis case: a handshake or a token on
a listener without SASL, or a SaslAuthenticate after authentication completed. Both get
ILLEGAL_SASL_STATE, as Kafka answers. Registering them here also puts them in the ApiVersions list.
Authorizes nothing.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import anyone
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from pybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse


@handler(ApiKey.SASL_HANDSHAKE, versions=(0, 1), authorize=anyone)
def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


@handler(ApiKey.SASL_AUTHENTICATE, versions=(0, 2), authorize=anyone)
def handle_sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                    error_message="SaslAuthenticate request received after successful "
                                                  "authentication")
