"""OAUTHBEARER: JWTs signed by the openssl CLI (an independent RSA implementation), checked by our verifier.

A token signer shared with the integration tests; the exchange of RFC 7628 as Kafka runs it (error
challenge, 0x01, SASL_AUTHENTICATION_FAILED).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.security.errors import SaslFailure
from pybroker.broker.security.jwt import MIN_RSA_BITS, TokenError, Validation, verify
from pybroker.broker.security.sasl_oauthbearer import (
    INVALID_TOKEN,
    JwksFile,
    OAuthBearerServer,
    OAuthValidator,
)

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """An RSA key made by openssl, its JWKS file, and tokens signed with it."""

    def __init__(self, directory: Path, kid: str = "k1") -> None:
        self.kid = kid
        self.key = directory / f"{kid}.pem"
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", f"rsa_keygen_bits:{MIN_RSA_BITS}",
                        "-out", str(self.key)], check=True, capture_output=True)
        modulus = subprocess.run(["openssl", "rsa", "-in", str(self.key), "-noout", "-modulus"], check=True,
                                 capture_output=True, text=True).stdout.strip().split("=", 1)[1]
        self.jwks = directory / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                                                   "n": _b64url(bytes.fromhex(modulus)),
                                                   "e": _b64url((65537).to_bytes(3, "big"))}]}))

    @property
    def url(self) -> str:
        return self.jwks.resolve().as_uri()

    def token(self, sub: str = "alice", lifetime_s: float = 300, alg: str = "RS256", **claims: Any) -> str:
        now = time.time()
        body = {"sub": sub, "iat": int(now), "exp": int(now + lifetime_s), **claims}
        head = {"alg": alg, "typ": "JWT", "kid": self.kid}
        signed = f"{_b64url(json.dumps(head).encode())}.{_b64url(json.dumps(body).encode())}"
        digest = {"RS256": "-sha256", "RS384": "-sha384", "RS512": "-sha512"}.get(alg, "-sha256")
        signature = subprocess.run(["openssl", "dgst", digest, "-sign", str(self.key)], input=signed.encode(),
                                   check=True, capture_output=True).stdout
        return f"{signed}.{_b64url(signature)}"


def client_first(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Issuer:
    return Issuer(tmp_path_factory.mktemp("jwks"))


RULES = Validation(issuer="https://issuer.example", audiences=("kafka",), sub_claim="sub", skew_s=30)


def _verify(issuer: Issuer, token: str, rules: Validation = RULES) -> Any:
    return verify(token, JwksFile(issuer.url).keys(), rules, int(time.time() * 1000))


@pytest.mark.parametrize("alg", ["RS256", "RS384", "RS512"])
def test_a_good_token(issuer: Issuer, alg: str) -> None:
    checked = _verify(issuer, issuer.token(alg=alg, iss="https://issuer.example", aud=["other", "kafka"]))
    assert checked.principal == "alice" and checked.expires_ms > time.time() * 1000


def test_refused_tokens(issuer: Issuer) -> None:
    good = {"iss": "https://issuer.example", "aud": "kafka"}
    cases = {
        "expired": issuer.token(lifetime_s=-60, **good),
        "unexpected issuer": issuer.token(iss="https://evil.example", aud="kafka"),
        "unexpected audience": issuer.token(iss="https://issuer.example", aud="elsewhere"),
        "iat is in the future": issuer.token(lifetime_s=7200, **{**good, "iat": int(time.time()) + 3600}),
    }
    for reason, token in cases.items():
        with pytest.raises(TokenError, match=reason):
            _verify(issuer, token)
    head, body, signature = issuer.token(**good).split(".")
    forged_body = _b64url(json.dumps({"sub": "admin", "exp": int(time.time()) + 60}).encode())
    unsigned = _b64url(json.dumps({"alg": "none"}).encode())
    for token, reason in ((f"{head}.{forged_body}.{signature}", "bad signature"),
                          (f"{unsigned}.{body}.", "not accepted"),
                          ("a.b", "not a compact JWS"), (f"{head}.{body}.!!!", "bad base64url")):
        with pytest.raises(TokenError, match=reason):
            _verify(issuer, token)


def test_oauthbearer_exchange(issuer: Issuer) -> None:
    validator = OAuthValidator(JwksFile(issuer.url), Validation(None, (), "sub", 30))
    now = lambda: int(time.time() * 1000)  # noqa: E731
    server = OAuthBearerServer(validator, now)
    assert server.step(client_first(issuer.token(sub="svc-1", lifetime_s=60))) == b""
    assert server.complete and server.user == "svc-1" and server.expires_ms is not None
    refused = OAuthBearerServer(validator, now)
    assert refused.step(client_first(issuer.token(lifetime_s=-3600))) == INVALID_TOKEN.encode()
    assert not refused.complete
    with pytest.raises(SaslFailure) as failure:
        refused.step(b"\x01")
    assert failure.value.message == INVALID_TOKEN and "expired" in failure.value.reason
    for bad in (b"garbage", b"n,,\x01auth=Basic abc\x01\x01", b"p=x,,\x01auth=Bearer t\x01\x01", b"\xff"):
        with pytest.raises(SaslFailure):
            OAuthBearerServer(validator, now).step(bad)
