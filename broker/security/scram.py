"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server, as a sans-I/O state machine.

The broker holds, per user and mechanism, only what RFC 5802 calls the server's credential: the salt, the
iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword,
"Server Key"). Neither the password nor the salted password is kept, and neither can be computed back.

The exchange: client-first (`n,,n=user,r=cnonce`) -> server-first (`r=cnonce+snonce,s=salt,i=n`) ->
client-final (`c=biws,r=nonce,p=proof`) -> server-final (`v=signature`). The proof is checked with
`hmac.compare_digest`. Kafka's extensions (`tokenauth=true` for delegation tokens) are refused.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from pybroker.broker.security.errors import SaslFailure, generic_message
from pybroker.protocol.scram_mechanisms import MIN_ITERATIONS, ScramMechanism

#: bytes of server nonce (before base64)
NONCE_BYTES = 24
#: longest client message accepted (a user name and a nonce are short)
MAX_MESSAGE_BYTES = 4096
#: keys the stand-in salts of unknown users, so a user's salt looks the same on every attempt
_UNKNOWN_USER_SECRET = secrets.token_bytes(32)




@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted(mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                           iterations: int) -> ScramCredential:
    """What the broker keeps, from what AlterUserScramCredentials carries (the salted password is dropped)."""
    client_key = mechanism.hmac(salted_password, b"Client Key")
    return ScramCredential(salt, mechanism.hash(client_key), mechanism.hmac(salted_password, b"Server Key"),
                           iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, salt: bytes | None = None,
                             iterations: int = MIN_ITERATIONS) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salt, mechanism.salted_password(password, salt, iterations),
                                  iterations)


def decode_saslname(name: str) -> str:
    """RFC 5802's `=2C` and `=3D` escapes in a user name; any other `=` is malformed."""
    if name.count("=") != name.count("=2C") + name.count("=3D"):
        raise ValueError("bad escape in user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> list[tuple[str, str]]:
    """`a=1,b=2` into [(a, 1), (b, 2)]; every part must be a one-letter attribute."""
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ValueError("malformed attribute")
        out.append((part[0], part[2:]))
    return out


class ScramServer:
    """One authentication exchange. `step(token)` returns the next server message or raises `SaslFailure`."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], ScramCredential | None],
                 nonce: Callable[[], str] | None = None) -> None:
        self.mechanism_spec = mechanism
        self.mechanism = mechanism.name
        self._lookup = lookup
        self._nonce = nonce or (lambda: base64.b64encode(secrets.token_bytes(NONCE_BYTES)).decode())
        self._state = "client_first"
        self.complete = False
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce_full = ""
        self._unknown_user = False

    def _fail(self, reason: str) -> SaslFailure:
        self._state = "failed"
        return SaslFailure(generic_message(self.mechanism), user=self.user, reason=reason)

    def step(self, token: bytes) -> bytes:
        if len(token) > MAX_MESSAGE_BYTES:
            raise self._fail("SCRAM message too long")
        try:
            text = bytes(token).decode()
        except UnicodeDecodeError:
            raise self._fail("SCRAM message is not UTF-8") from None
        if self._state == "client_first":
            return self._client_first(text)
        if self._state == "client_final":
            return self._client_final(text)
        raise self._fail("token after the exchange ended")

    def _client_first(self, text: str) -> bytes:
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            # 'p=' asks for channel binding, which Kafka's SCRAM does not offer
            raise self._fail("unsupported or malformed GS2 header")
        authzid = parts[1]
        if authzid and not authzid.startswith("a="):
            raise self._fail("malformed GS2 header")
        try:
            attrs = _attributes(parts[2])
            if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
                raise ValueError("expected n=user,r=nonce")
            user = decode_saslname(attrs[0][1])
        except ValueError as exc:
            raise self._fail(f"malformed client-first message ({exc})") from None
        if any(key != "" for key, _ in attrs[2:]):
            # extensions (tokenauth=true): delegation tokens are not served
            raise self._fail("SCRAM extensions are not supported")
        self.user = user
        if authzid and decode_saslname(authzid[2:]) != user:
            raise self._fail("authorization id differs from user name")
        credential = self._lookup(user)
        self._unknown_user = credential is None
        if credential is None:
            # RFC 5802 section 5.1: go on with a stand-in credential and fail at the proof, so neither the
            # answer nor its timing says whether the user exists (the salt is stable per user name)
            salt = hmac.new(_UNKNOWN_USER_SECRET, user.encode(), "sha256").digest()
            credential = ScramCredential(salt, secrets.token_bytes(len(self.mechanism_spec.hash(b""))),
                                         secrets.token_bytes(len(self.mechanism_spec.hash(b""))), MIN_ITERATIONS)
        self._credential = credential
        self._gs2 = f"{parts[0]},{authzid},"
        self._client_first_bare = parts[2]
        self._nonce_full = attrs[1][1] + self._nonce()
        self._server_first = (f"r={self._nonce_full},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "client_final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        credential = self._credential
        assert credential is not None
        head, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise self._fail("client-final message without proof")
        try:
            attrs = _attributes(head)
            proof = base64.b64decode(proof_text, validate=True)
            binding = base64.b64decode(dict(attrs).get("c", ""), validate=True)
        except (ValueError, binascii.Error):
            raise self._fail("malformed client-final message") from None
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise self._fail("malformed client-final message")
        if binding != self._gs2.encode():
            raise self._fail("channel binding differs from the GS2 header")
        # RFC 5802 wants the combined nonce echoed exactly. librdkafka 2.0.x (kcat in Debian) sends its own
        # nonce once more in front of it, which Kafka accepted for years (its check was `endsWith`): accept
        # a message that ENDS with our combined nonce, which still proves it answers this exchange's
        # server nonce (and the proof covers the message as sent).
        echoed, expected = attrs[1][1].encode(), self._nonce_full.encode()
        if len(echoed) < len(expected) or not hmac.compare_digest(echoed[len(echoed) - len(expected):], expected):
            raise self._fail("nonce differs")
        spec = self.mechanism_spec
        auth_message = f"{self._client_first_bare},{self._server_first},{head}".encode()
        signature = spec.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._fail("wrong password")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(spec.hash(client_key), credential.stored_key) or self._unknown_user:
            raise self._fail("unknown user" if self._unknown_user else "wrong password")
        self._state = "done"
        self.complete = True
        server_signature = spec.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
