"""SASL/OAUTHBEARER (RFC 7628) on the server: a signed JWT checked against a JWKS file.

The client's first message is a GS2 header and key=value pairs separated by 0x01, one of them
`auth=Bearer <token>`. A good token completes the exchange, the principal is `User:<sub claim>`, and the
session ends no later than the token's `exp`. A bad token is answered, as Kafka's OAuthBearerSaslServer
does, with the error challenge `{"status":"invalid_token"}`; the client acknowledges it with a single
0x01 and then gets SASL_AUTHENTICATION_FAILED carrying that same JSON. Why the token was refused is
logged, never told. Extensions other than `auth` are ignored (no extension validator is configured).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

from pybroker.broker.security.errors import SaslFailure, generic_message
from pybroker.broker.security.jwt import RsaKey, TokenError, Validation, load_jwks, verify

INVALID_TOKEN = '{"status":"invalid_token"}'
#: longest client message accepted
MAX_MESSAGE_BYTES = 16 * 1024 + 256


class JwksFile:
    """The keys of a `file://` JWKS endpoint, read again when the file changes (keys rotate)."""

    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        if parsed.scheme != "file" or not parsed.path:
            raise ValueError("only file:// JWKS URLs are served")
        self.path = Path(unquote(parsed.path))
        self._stamp: tuple[int, int] | None = None
        self._keys: dict[str, RsaKey] = {}
        self.keys()  # a file that is missing or unreadable at start is a config error

    def keys(self) -> dict[str, RsaKey]:
        stat = os.stat(self.path)
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._keys = load_jwks(self.path.read_text(encoding="utf-8"))
            self._stamp = stamp
        return self._keys


class OAuthValidator:
    def __init__(self, jwks: JwksFile, rules: Validation) -> None:
        self.jwks = jwks
        self.rules = rules

    def keys(self) -> dict[str, RsaKey]:
        try:
            return self.jwks.keys()
        except (OSError, ValueError, KeyError, TypeError):
            return {}  # the file went bad: every token fails (and says why) until it is fixed


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, validator: OAuthValidator, now_ms: Callable[[], int]) -> None:
        self._validator = validator
        self._now_ms = now_ms
        self.complete = False
        self.user: str | None = None
        self.expires_ms: int | None = None
        self._error_reason: str | None = None

    def step(self, token: bytes) -> bytes:
        if self._error_reason is not None:  # the client's answer to our error challenge (0x01)
            raise SaslFailure(INVALID_TOKEN, reason=self._error_reason)
        if self.complete or len(token) > MAX_MESSAGE_BYTES:
            raise SaslFailure(generic_message(self.mechanism), reason="unexpected or oversized token")
        try:
            text = bytes(token).decode()
        except UnicodeDecodeError:
            raise SaslFailure(generic_message(self.mechanism), reason="token is not UTF-8") from None
        gs2, sep, rest = text.partition("\x01")
        head = gs2.split(",")
        if not sep or len(head) != 3 or head[0] not in ("n", "y") or head[2] != "" or \
                (head[1] and not head[1].startswith("a=")) or not rest.endswith("\x01\x01"):
            raise SaslFailure(generic_message(self.mechanism), reason="malformed OAUTHBEARER message")
        pairs = dict(kv.partition("=")[::2] for kv in rest[:-2].split("\x01"))
        scheme, _, bearer = pairs.get("auth", "").partition(" ")
        if scheme.lower() != "bearer" or not bearer.strip():
            raise SaslFailure(generic_message(self.mechanism), reason="no bearer token")
        try:
            checked = verify(bearer.strip(), self._validator.keys(), self._validator.rules, self._now_ms())
        except TokenError as exc:
            self._error_reason = f"invalid token: {exc}"
            return INVALID_TOKEN.encode()
        self.user = checked.principal
        if head[1] and head[1][2:] != checked.principal:
            raise SaslFailure(generic_message(self.mechanism), user=self.user,
                              reason="authorization id differs from the token's subject")
        self.expires_ms = checked.expires_ms
        self.complete = True
        return b""
