"""The one failure a SASL mechanism raises: what the client is told, and what only the log may know."""

from __future__ import annotations


class SaslFailure(Exception):
    """Authentication refused. `message` goes to the client (Kafka's wording); `reason` and `user` to the log.

    Neither ever holds a password or a token.
    """

    def __init__(self, message: str, *, user: str | None = None, reason: str = "invalid credentials") -> None:
        super().__init__(message)
        self.message = message
        self.user = user
        self.reason = reason


def generic_message(mechanism: str, reauthentication: bool = False) -> str:
    """Kafka's answer when a mechanism fails with a plain SaslException: it names nothing but the mechanism,
    so a client learns neither whether the user exists nor what was wrong (SaslServerAuthenticator)."""
    phase = "re-authentication" if reauthentication else "authentication"
    return f"Authentication failed during {phase} due to invalid credentials with SASL mechanism {mechanism}"
