"""SASL/PLAIN (RFC 4616) on the server: one token `authzid NUL user NUL password`, checked in constant time.

The messages are Kafka's (PlainSaslServer): a token without exactly two NULs says how many parts it has
(Kafka counts at most four); one whose names are not UTF-8 is a plain failure (the session turns it into the
generic message); a wrong password and an unknown user get the same answer and cost
the same time, so neither the answer nor its timing says whether the user exists.
"""

from __future__ import annotations

import hmac

from pybroker.broker.security.errors import SaslFailure, generic_message

INVALID = "Authentication failed: Invalid username or password"
#: compared against when the user is unknown, so that path costs what a wrong password costs
_DUMMY = b"\x00" * 32


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = {name: password.encode() for name, password in users.items()}
        self.complete = False
        self.user: str | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure(generic_message(self.mechanism), reason="token after completion")
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}",
                              reason="malformed PLAIN token")
        try:
            authzid, user = parts[0].decode(), parts[1].decode()
        except UnicodeDecodeError:
            raise SaslFailure(generic_message(self.mechanism), reason="malformed PLAIN token") from None
        password = parts[2]
        if not user:
            raise SaslFailure("Authentication failed: username not specified", reason="no username")
        if not password:
            raise SaslFailure("Authentication failed: password not specified", user=user, reason="no password")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different "
                              "from username", user=user, reason="authorization id differs")
        expected = self._users.get(user)
        same = hmac.compare_digest(expected if expected is not None else _DUMMY, password)
        if expected is None or not same:
            raise SaslFailure(INVALID, user=user, reason="unknown user" if expected is None else "wrong password")
        self.complete = True
        self.user = user
        return b""
