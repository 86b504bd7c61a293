"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator runs it, without I/O.

States: `initial` (ApiVersions and SaslHandshake are served), `authenticate` (SaslAuthenticate tokens
for the chosen mechanism; after a v0 handshake, raw size-prefixed tokens instead), `complete` (requests
flow to the handlers), `failed`. Anything else before `complete` is Kafka's ILLEGAL_SASL_STATE: the
connection closes without an answer.

After success the session knows its principal (`User:<name>`) and, with `connections.max.reauth.ms`,
when it expires (KIP-368): SaslAuthenticate v1+ tells the client, a client may re-authenticate with a
new SaslHandshake at any time (the principal must stay the same), and a request that arrives after the
expiry closes the connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pybroker.broker.security.errors import SaslFailure
from pybroker.broker.security.sasl_config import ListenerSasl
from pybroker.broker.security.sasl_oauthbearer import OAuthBearerServer
from pybroker.broker.security.sasl_plain import PlainServer
from pybroker.broker.security.scram import ScramCredential, ScramServer
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse
from pybroker.protocol.scram_mechanisms import MECHANISMS as SCRAM_MECHANISMS

#: characters of a client-chosen user name written to the log
MAX_LOGGED_USER = 128


class Mechanism(Protocol):
    mechanism: str
    complete: bool
    user: str | None

    def step(self, token: bytes) -> bytes: ...


CredentialLookup = Callable[[str, str], ScramCredential | None]


def new_mechanism(name: str, settings: ListenerSasl, scram: CredentialLookup,
                  now_ms: Callable[[], int]) -> Mechanism:
    if name == "PLAIN":
        return PlainServer(settings.plain_users)
    if name == "OAUTHBEARER":
        assert settings.oauth is not None
        return OAuthBearerServer(settings.oauth, now_ms)
    spec = SCRAM_MECHANISMS[name]
    return ScramServer(spec, lambda user: scram(user, spec.name))


class SaslSession:
    def __init__(self, settings: ListenerSasl, scram: CredentialLookup, now_ms: Callable[[], int]) -> None:
        self.settings = settings
        self._scram = scram
        self._now_ms = now_ms
        self._lifetime_ms = 0
        self.state = "initial"
        self.mechanism: Mechanism | None = None
        self.raw_tokens = False  # a v0 handshake: tokens come without Kafka framing
        self.principal: str | None = None  # set once authenticated; kept during re-authentication
        self.expires_at_ms: int | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def reauthenticating(self) -> bool:
        return self.authenticated and self.state == "authenticate"

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    def admits_before_authentication(self, api_key: int) -> bool:
        """ApiVersions may come before the handshake (Kafka's HANDSHAKE_OR_VERSIONS_REQUEST state)."""
        return self.state == "initial" and api_key == 18

    def handshake(self, mechanism: str, version: int) -> tuple[SaslHandshakeResponse, bool]:
        """The answer to SaslHandshake, and whether the connection must close after it."""
        enabled = list(self.settings.mechanisms)
        if self.state not in ("initial", "complete"):
            self.state = "failed"
            return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled), True
        if mechanism not in self.settings.mechanisms:
            self.state = "failed"
            return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled), True
        self.mechanism = new_mechanism(mechanism, self.settings, self._scram, self._now_ms)
        self.raw_tokens = version == 0 and not self.authenticated
        self.state = "authenticate"
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled), False

    def step(self, token: bytes, now_ms: int) -> bytes:
        """Feed one client token; the server's token back, or `SaslFailure` (the session is then failed)."""
        mechanism = self.mechanism
        if self.state != "authenticate" or mechanism is None:
            self.state = "failed"
            raise SaslFailure("Unexpected SASL token", reason="token outside an exchange")
        try:
            answer = mechanism.step(token)
        except SaslFailure as failure:
            self.state = "failed"
            if self.reauthenticating:
                failure.message = failure.message.replace("during authentication", "during re-authentication")
            raise
        if mechanism.complete:
            principal = f"User:{mechanism.user}"
            if self.principal is not None and principal != self.principal:
                self.state = "failed"
                raise SaslFailure("Cannot change principals during re-authentication from "
                                  f"{self.principal}: {principal}", user=mechanism.user,
                                  reason="principal changed on re-authentication")
            self.principal = principal
            self.state = "complete"
            self.raw_tokens = False
            # the session ends at connections.max.reauth.ms, and never after the credential (a token) expires
            ends = [now_ms + self.settings.reauth_ms] if self.settings.reauth_ms > 0 else []
            token_expiry = getattr(mechanism, "expires_ms", None)
            if token_expiry is not None:
                ends.append(token_expiry)
            self.expires_at_ms = min(ends) if ends else None
            self._lifetime_ms = max(1, self.expires_at_ms - now_ms) if self.expires_at_ms is not None else 0
        return answer

    def session_lifetime_ms(self) -> int:
        return self._lifetime_ms if self.state == "complete" else 0

    def authenticate(self, token: bytes, now_ms: int) -> tuple[SaslAuthenticateResponse, SaslFailure | None]:
        """The answer to one SaslAuthenticate request, and the failure (the connection then closes)."""
        try:
            answer = self.step(token, now_ms)
        except SaslFailure as failure:
            return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                            error_message=failure.message), failure
        return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None, auth_bytes=answer,
                                        session_lifetime_ms=self.session_lifetime_ms()), None


def log_context(session: SaslSession, failure: SaslFailure) -> dict[str, Any]:
    """What a failure's log line may say: mechanism, user name and reason; never a token or password."""
    user = failure.user if failure.user is None or len(failure.user) <= MAX_LOGGED_USER else \
        failure.user[:MAX_LOGGED_USER] + "..."
    return {"mechanism": session.mechanism.mechanism if session.mechanism else None, "user": user,
            "reason": failure.reason}
