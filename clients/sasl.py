"""The client side of PLAIN and SCRAM, without I/O, for pybroker's own admin tools.

`first()` is the first token; `step(server_token)` the next one (None when the client has nothing more
to send); a SCRAM client checks the server's signature in its last step, so a broker that does not hold
the credential is caught too.
"""

from __future__ import annotations

import base64
import hmac
import secrets

from pybroker.protocol.scram_mechanisms import MECHANISMS as SCRAM_MECHANISMS


class ClientAuthError(Exception):
    """The server's answer does not follow the mechanism (or fails its signature check)."""


class PlainClient:
    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user, password

    def first(self) -> bytes:
        return b"\0" + self.user.encode() + b"\0" + self.password.encode()

    def step(self, server_token: bytes) -> bytes | None:
        return None


class ScramClient:
    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self.spec = SCRAM_MECHANISMS[mechanism]
        self.user, self.password = user, password
        self.nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self._auth_message = b""
        self._server_key = b""
        self._done = False

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def step(self, server_token: bytes) -> bytes | None:
        if self._auth_message:
            self._verify(server_token)
            return None
        text = server_token.decode(errors="replace")
        try:
            attrs = dict(part.split("=", 1) for part in text.split(","))
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (ValueError, KeyError):
            raise ClientAuthError("malformed SCRAM server-first message") from None
        if not nonce.startswith(self.nonce) or iterations < 1:
            raise ClientAuthError("the server's SCRAM nonce does not extend ours")
        spec = self.spec
        salted = spec.salted_password(self.password, salt, iterations)
        client_key = spec.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = spec.hmac(spec.hash(client_key), self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_key = spec.hmac(salted, b"Server Key")
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: bytes) -> None:
        expected = b"v=" + base64.b64encode(self.spec.hmac(self._server_key, self._auth_message))
        if not hmac.compare_digest(bytes(server_final), expected):
            raise ClientAuthError("the server's SCRAM signature is wrong")
        self._done = True


def client_mechanism(mechanism: str, user: str, password: str) -> PlainClient | ScramClient:
    if mechanism == "PLAIN":
        return PlainClient(user, password)
    if mechanism in SCRAM_MECHANISMS:
        return ScramClient(mechanism, user, password)
    raise ValueError(f"sasl.mechanism {mechanism} is not supported (PLAIN, {', '.join(SCRAM_MECHANISMS)})")
