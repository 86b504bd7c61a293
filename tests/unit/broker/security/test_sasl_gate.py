"""The SASL gate of a connection, against an in-process broker with a PLAINTEXT and a SASL_PLAINTEXT listener.

Requests are built with our codecs; SCRAM is spoken by the RFC client of `test_sasl_mechanisms`.
"""

from __future__ import annotations

import asyncio
import hashlib
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from pybroker.config.types import ConfigError
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from pybroker.protocol.messages.alter_user_scram_credentials import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from pybroker.protocol.messages.describe_user_scram_credentials import UserName
from pybroker.protocol.messages.metadata import MetadataRequestTopic
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.security.test_sasl_mechanisms import RfcClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" '
        'user_bob="bob-secret";')
DELAY_MS = 150


def _config(tmp_path: Path, **extra: str) -> BrokerConfig:
    return BrokerConfig.load({
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": str(DELAY_MS),
        **extra,
    })


@pytest.fixture
async def sasl_app(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    broker = BrokerApp(_config(tmp_path))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


async def _client(app: BrokerApp, index: int) -> RawClient:
    return RawClient(*await asyncio.open_connection("127.0.0.1", app.bound_ports[index]))


async def _closed(client: RawClient) -> bool:
    try:
        return await asyncio.wait_for(client.reader.read(), 5) == b""
    finally:
        client.close()


async def _plain(client: RawClient, user: str, password: str, version: int = 2) -> object:
    handshake = await client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert handshake.error_code == 0 and "PLAIN" in handshake.mechanisms
    return await client.call(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), version)


async def test_only_api_versions_and_handshake_before_authentication(sasl_app: BrokerApp) -> None:
    client = await _client(sasl_app, 1)
    await client.send(MetadataRequest(topics=[]), 1)
    assert await _closed(client)
    plain = await _client(sasl_app, 0)  # the PLAINTEXT listener beside it is unchanged
    assert (await plain.call(MetadataRequest(topics=[]), 1)).brokers[0].port == sasl_app.bound_ports[0]
    plain.close()


async def test_unsupported_mechanism_lists_the_enabled_ones_and_closes(sasl_app: BrokerApp) -> None:
    client = await _client(sasl_app, 1)
    response = await client.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    # in Kafka's order (a Java HashSet's), not the config's: PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
    assert response.mechanisms == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]
    assert await _closed(client)


async def test_plain_login_then_requests_flow_and_advertise_the_sasl_port(sasl_app: BrokerApp) -> None:
    client = await _client(sasl_app, 1)
    response = await _plain(client, "alice", "alice-secret")
    assert (response.error_code, response.error_message, response.session_lifetime_ms) == (0, None, 0)
    metadata = await client.call(MetadataRequest(topics=[]), 1)
    assert metadata.brokers[0].port == sasl_app.bound_ports[1]
    assert any(c.principal == "User:alice" for c in sasl_app.state.connections)
    again = await client.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
    assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE  # as Kafka's KafkaApis answers it
    client.close()


async def test_wrong_password_is_answered_after_the_delay_and_closed(sasl_app: BrokerApp) -> None:
    client = await _client(sasl_app, 1)
    started = time.monotonic()
    response = await _plain(client, "alice", "not-her-password")
    assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == "Authentication failed: Invalid username or password"
    assert await _closed(client)
    other = await _client(sasl_app, 1)  # the broker goes on serving everyone else
    assert (await _plain(other, "bob", "bob-secret")).error_code == 0
    other.close()


async def test_v0_handshake_then_raw_tokens(sasl_app: BrokerApp) -> None:
    client = await _client(sasl_app, 1)
    assert (await client.call(SaslHandshakeRequest(mechanism="PLAIN"), 0)).error_code == 0
    token = b"\0alice\0alice-secret"
    client.writer.write(struct.pack(">i", len(token)) + token)
    assert await asyncio.wait_for(client.reader.readexactly(4), 5) == b"\0\0\0\0"
    assert (await client.call(MetadataRequest(topics=[]), 1)).brokers
    client.close()


def _upsert(name: str, mechanism: int, password: str, iterations: int = 4096) -> ScramCredentialUpsertion:
    hash_name = {1: "sha256", 2: "sha512"}.get(mechanism, "sha256")
    salt = b"pepper-" + name.encode()
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                    salted_password=hashlib.pbkdf2_hmac(hash_name, password.encode(), salt,
                                                                        iterations))


async def test_scram_users_altered_described_and_logged_in(sasl_app: BrokerApp) -> None:
    admin = await _client(sasl_app, 0)
    altered = await admin.call(AlterUserScramCredentialsRequest(upsertions=[
        _upsert("carol", 2, "carol-pw", 8192), _upsert("carol", 1, "carol-pw"), _upsert("weak", 2, "x", 100),
        _upsert("odd", 7, "x")], deletions=[ScramCredentialDeletion(name="ghost", mechanism=2)]), 0)
    codes = {r.user: (r.error_code, r.error_message) for r in altered.results}
    assert codes == {"ghost": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not "
                                                             "exist"),
                     # as Kafka: one change per user and request, whatever the mechanisms
                     "carol": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the "
                                                             "same request"),
                     "weak": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
                     "odd": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")}
    for upsertion in (_upsert("carol", 2, "carol-pw", 8192), _upsert("carol", 1, "carol-pw")):
        done = await admin.call(AlterUserScramCredentialsRequest(upsertions=[upsertion]), 0)
        assert [(r.user, r.error_code) for r in done.results] == [("carol", 0)]
    twice = await admin.call(AlterUserScramCredentialsRequest(upsertions=[
        _upsert("dave", 2, "a"), _upsert("dave", 2, "b")]), 0)
    assert twice.results[0].error_code == ErrorCode.DUPLICATE_RESOURCE
    described = await admin.call(DescribeUserScramCredentialsRequest(users=None), 0)
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in described.results] == \
        [("carol", [(1, 4096), (2, 8192)])]
    unknown = await admin.call(DescribeUserScramCredentialsRequest(users=[UserName(name="dave")]), 0)
    assert unknown.results[0].error_code == ErrorCode.RESOURCE_NOT_FOUND
    admin.close()
    for mechanism, hash_name in (("SCRAM-SHA-512", "sha512"), ("SCRAM-SHA-256", "sha256")):
        client = await _client(sasl_app, 1)
        assert (await client.call(SaslHandshakeRequest(mechanism=mechanism), 1)).error_code == 0
        rfc = RfcClient(hash_name, "carol", "carol-pw", "nonce42")
        first = await client.call(SaslAuthenticateRequest(auth_bytes=rfc.first()), 1)
        final = await client.call(SaslAuthenticateRequest(auth_bytes=rfc.final(first.auth_bytes)), 1)
        assert final.error_code == 0 and rfc.verify(final.auth_bytes)
        client.close()


#: the session lifetime of the re-authentication test: its steps must land inside windows of about half
REAUTH_MS = 1000
#: what a read from a connection the broker closed raises
CLOSED = (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError)


async def _reauthentication_extends_the_session(broker: BrokerApp) -> bool:
    """Log in, log in again halfway, then send a request after the first session's end but inside the
    second's: it is answered. Each step is timed at the client (the broker's clock for a session starts
    between sending the login and reading its answer); False when this machine was too slow to land a
    step inside its window, so the run proves nothing and is tried again."""
    life = REAUTH_MS / 1000
    client = await _client(broker, 1)
    try:
        sent = time.monotonic()
        assert (await _plain(client, "alice", "alice-secret", version=1)).session_lifetime_ms == REAUTH_MS
        answered = time.monotonic()  # session 1 ends between sent + life and answered + life
        await asyncio.sleep(life / 2)
        again_sent = time.monotonic()
        try:
            again = await _plain(client, "alice", "alice-secret", version=1)  # KIP-368
        except CLOSED:
            again = None
        if time.monotonic() > sent + life:
            return False  # it may have reached the broker after session 1 ended
        assert again is not None and again.error_code == 0, again
        await asyncio.sleep(max(0.0, answered + life + 0.05 - time.monotonic()))  # past session 1's end
        try:
            metadata = await client.call(MetadataRequest(topics=[]), 1)
        except CLOSED:
            metadata = None
        if time.monotonic() > again_sent + life:
            return False  # it may have reached the broker after session 2 ended
        assert metadata is not None and metadata.brokers, "closed at the first session's end"
        return True
    finally:
        client.close()


async def test_expired_session_is_closed_and_reauthentication_extends_it(tmp_path: Path) -> None:
    broker = BrokerApp(_config(tmp_path, **{"connections.max.reauth.ms": str(REAUTH_MS)}))
    await broker.start()
    try:
        for _ in range(5):
            if await _reauthentication_extends_the_session(broker):
                break
        else:
            pytest.fail("five runs were too slow to land their steps inside a session of 1 s")
        client = await _client(broker, 1)
        await _plain(client, "alice", "alice-secret", version=1)
        other = await _plain(client, "bob", "bob-secret", version=1)
        assert other.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # the principal may not change
        assert await _closed(client)
        late = await _client(broker, 1)
        await _plain(late, "alice", "alice-secret", version=1)
        await asyncio.sleep(REAUTH_MS / 1000 + 0.1)  # past its end however slowly the answer came
        await late.send(MetadataRequest(topics=[]), 1)
        assert await _closed(late)
    finally:
        await broker.stop()


async def test_frames_before_authentication_are_small(sasl_app: BrokerApp) -> None:
    client = await _client(sasl_app, 1)
    client.writer.write(struct.pack(">i", 524_289))  # Kafka's sasl.server.max.receive.size, plus one
    assert await _closed(client)
    client = await _client(sasl_app, 1)
    assert (await _plain(client, "alice", "alice-secret")).error_code == 0
    big = MetadataRequest(topics=[MetadataRequestTopic(name="t" * 200) for _ in range(3000)],
                          allow_auto_topic_creation=False)
    assert (await client.call(big, 4)).topics  # ~600 KB: fine once authenticated
    client.close()


async def test_handshake_on_a_plaintext_listener_is_illegal(sasl_app: BrokerApp) -> None:
    client = await _client(sasl_app, 0)
    assert (await client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)).error_code == ErrorCode.ILLEGAL_SASL_STATE
    client.close()


@pytest.mark.parametrize(("extra", "key"), [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER"}, "sasl.oauthbearer.jwks.endpoint.url"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks"},
     "sasl.oauthbearer.jwks.endpoint.url"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks"},
     "sasl.oauthbearer.jwks.endpoint.url"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "not jaas"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
])
async def test_bad_sasl_config_stops_the_start(tmp_path: Path, extra: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as error:
        BrokerApp(_config(tmp_path, **extra))
    assert key in str(error.value) and "secret" not in str(error.value)


def test_listener_settings_follow_kafkas_lookup_order(tmp_path: Path) -> None:
    from pybroker.broker.security.sasl_config import all_listeners_sasl

    config = BrokerConfig.load({
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "INTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_g="global";',
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.internal.connections.max.reauth.ms": "60000",
    })
    assert {s.name: s.security_protocol for s in config.listener_specs()}["INTERNAL"] == "SASL_PLAINTEXT"
    settings = all_listeners_sasl(config)
    assert set(settings) == {"SASL_PLAINTEXT", "INTERNAL"}
    assert settings["SASL_PLAINTEXT"].mechanisms == ("SCRAM-SHA-512",)
    assert settings["SASL_PLAINTEXT"].plain_users == {} and settings["SASL_PLAINTEXT"].reauth_ms == 0
    internal = settings["INTERNAL"]
    assert internal.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert internal.plain_users == {"g": "global"} and internal.reauth_ms == 60_000
    assert "global" not in repr(internal)


async def test_scram_user_count_is_capped(sasl_app: BrokerApp, monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.broker.handlers import user_scram_credentials

    monkeypatch.setattr(user_scram_credentials, "MAX_USERS", 2)
    admin = await _client(sasl_app, 0)
    altered = await admin.call(AlterUserScramCredentialsRequest(upsertions=[
        _upsert("u1", 1, "p"), _upsert("u2", 2, "p"), _upsert("u3", 2, "p")]), 0)
    assert sorted((r.user, r.error_code) for r in altered.results) == [
        ("u1", 0), ("u2", 0), ("u3", ErrorCode.UNACCEPTABLE_CREDENTIAL)]
    changed = await admin.call(AlterUserScramCredentialsRequest(upsertions=[_upsert("u2", 1, "p")]), 0)
    assert changed.results[0].error_code == 0  # a known user may still change
    admin.close()
