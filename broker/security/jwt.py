"""Signed JSON Web Tokens (RFC 7519) checked against a JSON Web Key Set file, for SASL/OAUTHBEARER.

Only what a broker needs: a compact JWS signed with RS256, RS384 or RS512 (RSASSA-PKCS1-v1_5, RFC 7518
section 3.3), verified with the RSA public key of its `kid` from the JWKS, then the claims Kafka's
OAuthBearerValidatorCallbackHandler checks: `exp` (required), `iat` and `nbf` not in the future, the
expected issuer and audience when configured, and the subject claim that becomes the principal. Every
time comparison allows `sasl.oauthbearer.clock.skew.seconds`. Unsigned tokens (`alg: none`) are refused.

RSA verification is a public-key operation on public data, so it is done with Python's integers:
signature^e mod n must equal the EMSA-PKCS1-v1_5 encoding of the digest.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

#: DER DigestInfo prefixes (RFC 8017 section 9.2, note 1) by JWS algorithm
_DIGEST_INFO = {
    "RS256": ("sha256", bytes.fromhex("3031300d060960864801650304020105000420")),
    "RS384": ("sha384", bytes.fromhex("3041300d060960864801650304020205000430")),
    "RS512": ("sha512", bytes.fromhex("3051300d060960864801650304020305000440")),
}
#: longest token accepted (a few claims; large tokens are an attack on the decoder)
MAX_TOKEN_BYTES = 16 * 1024
MIN_RSA_BITS = 2048


class TokenError(Exception):
    """Why a token is refused (for the log; the client is told only `invalid_token`)."""


def b64url(text: str) -> bytes:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise TokenError("bad base64url") from None


@dataclass(frozen=True, slots=True)
class RsaKey:
    n: int
    e: int

    @property
    def size(self) -> int:
        return (self.n.bit_length() + 7) // 8


def load_jwks(text: str) -> dict[str, RsaKey]:
    """The RSA signing keys of a JWKS document, by key id ("" for a key without one)."""
    doc = json.loads(text)
    keys: dict[str, RsaKey] = {}
    for entry in doc.get("keys", []) if isinstance(doc, dict) else []:
        if not isinstance(entry, dict) or entry.get("kty") != "RSA" or entry.get("use", "sig") != "sig":
            continue
        key = RsaKey(int.from_bytes(b64url(str(entry["n"])), "big"), int.from_bytes(b64url(str(entry["e"])), "big"))
        if key.n.bit_length() >= MIN_RSA_BITS and key.e > 1:
            keys[str(entry.get("kid", ""))] = key
    return keys


def _verify_rsa(alg: str, key: RsaKey, signed: bytes, signature: bytes) -> bool:
    hash_name, prefix = _DIGEST_INFO[alg]
    if len(signature) != key.size:
        return False
    value = int.from_bytes(signature, "big")
    if value >= key.n:
        return False
    encoded = pow(value, key.e, key.n).to_bytes(key.size, "big")
    digest_info = prefix + hashlib.new(hash_name, signed).digest()
    expected = b"\x00\x01" + b"\xff" * (key.size - len(digest_info) - 3) + b"\x00" + digest_info
    return hmac.compare_digest(encoded, expected)


@dataclass(frozen=True, slots=True)
class Validation:
    issuer: str | None
    audiences: tuple[str, ...]
    sub_claim: str
    skew_s: int


@dataclass(frozen=True, slots=True)
class Token:
    principal: str
    expires_ms: int
    claims: dict[str, Any]


def verify(token: str, keys: dict[str, RsaKey], rules: Validation, now_ms: int) -> Token:
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenError("token too long")
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("not a compact JWS")
    try:
        header = json.loads(b64url(parts[0]))
        claims = json.loads(b64url(parts[1]))
    except (ValueError, UnicodeDecodeError):
        raise TokenError("header or claims are not JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenError("header or claims are not JSON objects")
    alg = header.get("alg")
    if alg not in _DIGEST_INFO:
        raise TokenError(f"algorithm {str(alg)[:16]!r} is not accepted")
    key = keys.get(str(header.get("kid", ""))) or (next(iter(keys.values())) if len(keys) == 1 and
                                                    "kid" not in header else None)
    if key is None:
        raise TokenError("no key for the token's kid")
    if not _verify_rsa(alg, key, f"{parts[0]}.{parts[1]}".encode(), b64url(parts[2])):
        raise TokenError("bad signature")
    now_s, skew = now_ms / 1000, rules.skew_s
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise TokenError("no exp claim")
    if exp + skew <= now_s:
        raise TokenError("expired")
    for claim in ("iat", "nbf"):
        value = claims.get(claim)
        if value is not None and (not isinstance(value, int | float) or value - skew > now_s):
            raise TokenError(f"{claim} is in the future")
    if rules.issuer is not None and claims.get("iss") != rules.issuer:
        raise TokenError("unexpected issuer")
    if rules.audiences:
        aud = claims.get("aud")
        given = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not set(map(str, given)) & set(rules.audiences):
            raise TokenError("unexpected audience")
    subject = claims.get(rules.sub_claim)
    if not isinstance(subject, str) or not subject.strip():
        raise TokenError(f"no {rules.sub_claim} claim")
    return Token(subject, int(exp * 1000), claims)
