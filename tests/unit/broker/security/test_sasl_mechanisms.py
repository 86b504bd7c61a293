"""The SASL mechanisms without sockets: SCRAM against an RFC 5802 client written here and RFC 7677's
test vector, PLAIN token parsing, JAAS parsing, and the SCRAM credential store (which never holds a password).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.security.errors import SaslFailure
from pybroker.broker.security.sasl_plain import INVALID, PlainServer
from pybroker.broker.security.scram import (
    ScramCredential,
    ScramServer,
    credential_from_password,
    decode_saslname,
)
from pybroker.broker.security.scram_store import ScramStore
from pybroker.clients.client_config import ClientConfigError, client_security
from pybroker.clients.sasl import ClientAuthError, ScramClient
from pybroker.config.jaas import JaasError, parse_jaas, plain_users
from pybroker.protocol.scram_mechanisms import MECHANISMS


class RfcClient:
    """A SCRAM client straight from RFC 5802 section 3, independent of the server's code."""

    def __init__(self, hash_name: str, user: str, password: str, nonce: str) -> None:
        self.hash_name, self.user, self.password, self.nonce = hash_name, user, password, nonce

    def first(self) -> bytes:
        self.bare = f"n={self.user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes, echo_prefix: str = "") -> bytes:
        text = server_first.decode()
        attrs = dict(part.split("=", 1) for part in text.split(","))
        assert attrs["r"].startswith(self.nonce)
        salted = hashlib.pbkdf2_hmac(self.hash_name, self.password.encode(), base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash_name).digest()
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        without_proof = f"c=biws,r={echo_prefix}{attrs['r']}"
        self.auth_message = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, self.auth_message, self.hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_key = hmac.new(salted, b"Server Key", self.hash_name).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        expected = hmac.new(self.server_key, self.auth_message, self.hash_name).digest()
        return server_final == b"v=" + base64.b64encode(expected)


def _server(name: str, users: dict[str, ScramCredential], nonce: str | None = None) -> ScramServer:
    return ScramServer(MECHANISMS[name], users.get, (lambda: nonce) if nonce else None)


def test_rfc7677_scram_sha_256_vector() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    users = {"user": credential_from_password(MECHANISMS["SCRAM-SHA-256"], "pencil", salt, 4096)}
    server = _server("SCRAM-SHA-256", users, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.user == "user"


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("user", ["alice", "a,b=c", "ünï"])
def test_scram_exchange_with_an_rfc_client(mechanism: str, user: str) -> None:
    spec = MECHANISMS[mechanism]
    server = _server(mechanism, {user: credential_from_password(spec, "s3cret", iterations=4096)})
    client = RfcClient(spec.hash_name, user, "s3cret", "clientnonce123")
    server_first = server.step(client.first())
    assert client.verify(server.step(client.final(server_first)))
    assert server.complete and server.user == user


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_scram_wrong_password_and_unknown_user_get_the_generic_message(mechanism: str) -> None:
    spec = MECHANISMS[mechanism]
    users = {"alice": credential_from_password(spec, "right")}
    server = _server(mechanism, users)
    client = RfcClient(spec.hash_name, "alice", "wrong", "n1")
    first = server.step(client.first())
    with pytest.raises(SaslFailure) as wrong:
        server.step(client.final(first))
    assert wrong.value.message == ("Authentication failed during authentication due to invalid credentials with "
                                   f"SASL mechanism {mechanism}")
    assert (wrong.value.user, wrong.value.reason) == ("alice", "wrong password")
    assert not server.complete
    nobody = RfcClient(spec.hash_name, "nobody", "x", "n2")
    stranger = _server(mechanism, users)
    challenge = stranger.step(nobody.first())  # an unknown user is answered like a known one ...
    assert b",i=4096" in challenge
    again = _server(mechanism, users).step(RfcClient(spec.hash_name, "nobody", "x", "n3").first())
    assert challenge.split(b",")[1] == again.split(b",")[1]  # ... with the same salt every time
    with pytest.raises(SaslFailure) as unknown:
        stranger.step(nobody.final(challenge))
    assert unknown.value.message == wrong.value.message  # nothing tells the client whether the user exists
    assert unknown.value.reason == "unknown user"


def test_scram_refuses_a_changed_nonce_channel_binding_and_extensions() -> None:
    spec = MECHANISMS["SCRAM-SHA-512"]
    users = {"u": credential_from_password(spec, "pw")}
    server = _server("SCRAM-SHA-512", users)
    client = RfcClient(spec.hash_name, "u", "pw", "abc")
    final = client.final(server.step(client.first()))
    with pytest.raises(SaslFailure, match="invalid credentials"):
        server.step(final.replace(b"r=abc", b"r=abd"))
    for first in (b"p=tls-unique,,n=u,r=x", b"n,,n=u,r=x,tokenauth=true", b"n,,r=x", b"garbage", b"n,a=v,n=u,r=x"):
        with pytest.raises(SaslFailure):
            _server("SCRAM-SHA-512", users).step(first)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_scram_server_never_fails_other_than_by_sasl_failure(first: bytes, final: bytes) -> None:
    spec = MECHANISMS["SCRAM-SHA-256"]
    server = _server("SCRAM-SHA-256", {"u": credential_from_password(spec, "pw", b"salt", 4096)})
    try:
        server.step(first)
        server.step(final)
    except SaslFailure:
        return
    raise AssertionError("random bytes authenticated")


def test_librdkafka_2_0_doubled_client_nonce_is_accepted_as_kafka_did() -> None:
    spec = MECHANISMS["SCRAM-SHA-256"]
    server = _server("SCRAM-SHA-256", {"u": credential_from_password(spec, "pw")})
    client = RfcClient(spec.hash_name, "u", "pw", "cn")
    first = server.step(client.first())
    assert client.verify(server.step(client.final(first, echo_prefix="cn")))  # echoes "cn" + "cn<server nonce>"


def test_saslname_escapes() -> None:
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        decode_saslname("a=b")


def test_plain_tokens() -> None:
    server = PlainServer({"alice": "alice-secret"})
    assert server.step(b"\x00alice\x00alice-secret") == b"" and server.user == "alice" and server.complete
    assert PlainServer({"alice": "pw"}).step(b"alice\x00alice\x00pw") == b""
    cases = {
        b"\x00alice\x00wrong": INVALID,
        b"\x00bob\x00alice-secret": INVALID,
        b"\x00\x00pw": "Authentication failed: username not specified",
        b"\x00alice\x00": "Authentication failed: password not specified",
        b"bob\x00alice\x00alice-secret": "Authentication failed: Client requested an authorization id that is "
                                         "different from username",
        # as Kafka 4.4's PlainSaslServer (tests/conformance: sasl/malformed-plain-token); it counts up to four
        b"alice-secret": "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
        b"\x00alice\x00alice-secret\x00extra": "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
        b"\x00a\x00b\x00c\x00d\x00e": "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
    }
    for token, message in cases.items():
        server = PlainServer({"alice": "alice-secret"})
        with pytest.raises(SaslFailure) as failure:
            server.step(token)
        assert failure.value.message == message
        assert "alice-secret" not in str(failure.value.__dict__)
        assert not server.complete


def test_jaas_parsing() -> None:
    entry = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                       '  username="admin" password="a\\"b" user_admin="admin-secret" user_alice=bare;')
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.flag == "required"
    assert entry.options["password"] == 'a"b'
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "bare"}
    scram = parse_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required;")
    assert scram.options == {}
    for bad in ("", "Module", "Module mandatory;", 'Module required user_a="x"', 'M required a="x"; N required;',
                'M required a="unterminated;'):
        with pytest.raises(JaasError) as error:
            parse_jaas(bad)
        assert '"x"' not in str(error.value)


def test_credential_store_round_trip_holds_no_password(tmp_path: Path) -> None:
    path = tmp_path / "scram-credentials.json"
    store = ScramStore(path)
    sha512, sha256 = MECHANISMS["SCRAM-SHA-512"], MECHANISMS["SCRAM-SHA-256"]
    password = "correct horse battery staple"
    salt = b"0123456789abcdef"
    salted = sha512.salted_password(password, salt, 4096)
    store.apply([("alice", "SCRAM-SHA-512", credential_from_password(sha512, password, salt, 4096)),
                 ("alice", "SCRAM-SHA-256", credential_from_password(sha256, password, iterations=5000)),
                 ("bob", "SCRAM-SHA-256", credential_from_password(sha256, "other"))], [])
    raw = path.read_bytes()
    for secret in (password.encode(), base64.b64encode(password.encode()), salted, base64.b64encode(salted),
                   salted.hex().encode()):
        assert secret not in raw
    assert path.stat().st_mode & 0o077 == 0
    reopened = ScramStore(path)
    assert reopened.users().keys() == {"alice", "bob"}
    assert reopened.get("alice", "SCRAM-SHA-256").iterations == 5000  # type: ignore[union-attr]
    assert reopened.get("alice", "SCRAM-SHA-512") == store.get("alice", "SCRAM-SHA-512")
    reopened.apply([], [("bob", "SCRAM-SHA-256")])
    assert set(json.loads(path.read_bytes())["users"]) == {"alice"}
    assert ScramStore(path).get("bob", "SCRAM-SHA-256") is None


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_our_scram_client_against_the_server(mechanism: str) -> None:
    spec = MECHANISMS[mechanism]
    server = _server(mechanism, {"op": credential_from_password(spec, "pw")})
    client = ScramClient(mechanism, "op", "pw")
    final = client.step(server.step(client.first()))
    assert final is not None
    assert client.step(server.step(final)) is None and server.complete
    forged = ScramClient(mechanism, "op", "pw")
    forged_final = forged.step(_server(mechanism, {"op": credential_from_password(spec, "pw")}).step(forged.first()))
    assert forged_final is not None
    with pytest.raises(ClientAuthError):  # a server signature from another exchange is caught
        forged.step(b"v=" + base64.b64encode(b"x" * len(spec.hash(b""))))


def test_command_config_keys() -> None:
    jaas = client_security({"security.protocol": "sasl_plaintext", "sasl.mechanism": "SCRAM-SHA-512",
                            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                                'username="admin" password="s";'})
    assert (jaas.protocol, jaas.mechanism, jaas.username, jaas.password) == ("SASL_PLAINTEXT", "SCRAM-SHA-512",
                                                                             "admin", "s")
    assert "s'" not in repr(jaas) and "password" not in repr(jaas)
    rdkafka = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                               "sasl.username": "u", "sasl.password": "p"})
    assert (rdkafka.mechanism, rdkafka.username, rdkafka.password) == ("PLAIN", "u", "p")
    assert not client_security({}).sasl
    for bad in ({"security.protocol": "SASL_PLAINTEXT"}, {"security.protocol": "TLS"},
                {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": "garbage"}):
        with pytest.raises(ClientConfigError):
            client_security(bad)
