"""SASL_PLAINTEXT beside PLAINTEXT on a real `pybroker start`, with every stock client.

kafka-python, confluent-kafka (librdkafka), aiokafka and kcat produce and consume with PLAIN and
SCRAM-SHA-512 (confluent-kafka also SCRAM-SHA-256). SCRAM users are created at runtime with
confluent-kafka's AdminClient over the PLAINTEXT listener; they log in at once and after a restart.
Wrong passwords and unknown users get SASL_AUTHENTICATION_FAILED while the broker goes on serving the
others, and the broker's log never holds a test password.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from pybroker.protocol.frame_codec import decode_response, encode_request
from pybroker.protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import (
    ck_admin,
    ck_producer,
    close_clients,
)
from tests.integration.secure_clients import (
    KCAT,
    ak_round_trip,
    ck_round_trip,
    kcat_round_trip,
    kp_round_trip,
)
from tests.unit.broker.security.test_sasl_mechanisms import RfcClient

pytestmark = pytest.mark.integration

PLAIN_USER, PLAIN_PASSWORD = "alice", "plain-Pw-4a1f9c"
SCRAM_USER, SCRAM_PASSWORD = "scram-bob", "scram-Pw-77e2d0"
RUNTIME_USER, RUNTIME_PASSWORD = "carol", "runtime-Pw-c0ffee"
WRONG_PASSWORD = "wrong-Pw-deadbeef"
PASSWORDS = (PLAIN_PASSWORD, SCRAM_PASSWORD, RUNTIME_PASSWORD, WRONG_PASSWORD)
RECORDS = 20


def _sasl_broker(workdir: Path, overrides: dict[str, str]) -> BrokerProcess:
    """A broker with a PLAINTEXT listener (the harness's readiness check) and a SASL_PLAINTEXT one."""
    return BrokerProcess(workdir, overrides, extra_listeners=["SASL_PLAINTEXT"])


@contextlib.contextmanager
def serving_users(proc: BrokerProcess) -> Iterator[BrokerProcess]:
    """Start `proc` with the SCRAM test user; at the end stop it cleanly and insist its log holds no test
    password (shared with the SASL_SSL tests)."""
    proc.start()
    _add_scram_user(proc, SCRAM_USER, SCRAM_PASSWORD)
    try:
        yield proc
    finally:
        close_clients()
        if proc.is_running():
            proc.stop(expect_code=0)
        log = proc.log_path.read_text(errors="replace")
        proc.close()
        assert not [p for p in PASSWORDS if p in log], "a test password reached the broker's log"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{PLAIN_USER}="{PLAIN_PASSWORD}" '
            'user_other="other-Pw";')
    with serving_users(_sasl_broker(tmp_path_factory.mktemp("sasl"), {
        "auto.create.topics.enable": "true",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "connection.failed.authentication.delay.ms": "100",
    })) as proc:
        yield proc


def _add_scram_user(broker: BrokerProcess, user: str, password: str) -> None:
    admin = ck_admin(broker.bootstrap)
    # one request per mechanism: like Kafka, the broker refuses two changes of one user in one request
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            assert future.result(timeout=15) is None


CREDENTIALS = {"PLAIN": (PLAIN_USER, PLAIN_PASSWORD), "SCRAM-SHA-256": (SCRAM_USER, SCRAM_PASSWORD),
               "SCRAM-SHA-512": (SCRAM_USER, SCRAM_PASSWORD)}


def _ck_conf(mechanism: str, user: str | None = None, password: str | None = None,
             protocol: str = "SASL_PLAINTEXT") -> dict[str, Any]:
    """librdkafka's spelling, which kcat shares (`sasl.mechanism` is its alias of `sasl.mechanisms`)."""
    default_user, default_password = CREDENTIALS[mechanism]
    return {"security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.username": user or default_user, "sasl.password": password or default_password}


def _kp_conf(mechanism: str, protocol: str = "SASL_PLAINTEXT") -> dict[str, Any]:
    """kafka-python's spelling, which aiokafka shares."""
    user, password = CREDENTIALS[mechanism]
    return {"security_protocol": protocol, "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}


def _values(topic: str) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in range(RECORDS)]


# -- every client, every mechanism ---------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python(sasl_broker: BrokerProcess, new_topic: Callable[..., str], mechanism: str) -> None:
    topic = new_topic()
    assert kp_round_trip(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), topic, _kp_conf(mechanism), _values(topic),
                         subscribe=True) == _values(topic)


def _ck_round_trip(bootstrap: str, topic: str, conf: dict[str, Any]) -> list[bytes]:
    return ck_round_trip(bootstrap, topic, conf, _values(topic), subscribe=True)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka(sasl_broker: BrokerProcess, new_topic: Callable[..., str], mechanism: str) -> None:
    topic = new_topic()
    assert _ck_round_trip(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), topic, _ck_conf(mechanism)) == _values(topic)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_aiokafka(sasl_broker: BrokerProcess, new_topic: Callable[..., str], mechanism: str) -> None:
    topic = new_topic()
    assert await ak_round_trip(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), topic, _kp_conf(mechanism),
                               _values(topic)) == _values(topic)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kcat(sasl_broker: BrokerProcess, new_topic: Callable[..., str], mechanism: str) -> None:
    topic = new_topic()
    values = [v.decode() for v in _values(topic)]
    assert kcat_round_trip(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), topic, _ck_conf(mechanism), values) == values


# -- refusals ------------------------------------------------------------------------------------------
def _raw_authenticate(bootstrap: str, mechanism: str, tokens: list[bytes]) -> list[Any]:
    """SaslHandshake v1, then SaslAuthenticate v2 per token (hand-built frames); the answers, until an error."""
    host, port = bootstrap.split(":")
    answers: list[Any] = []
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        def call(request: Any, version: int, correlation_id: int) -> Any:
            sock.sendall(encode_request(request, version, correlation_id))
            size = struct.unpack(">i", _recv(sock, 4))[0]
            return decode_response(_recv(sock, size), type(request).API_KEY, version)[1]

        handshake = call(SaslHandshakeRequest(mechanism=mechanism), 1, 1)
        assert handshake.error_code == 0
        for i, token in enumerate(tokens):
            answer = call(SaslAuthenticateRequest(auth_bytes=token), 2, i + 2)
            answers.append(answer)
            if answer.error_code:
                assert sock.recv(1) == b""  # closed after the failure
                break
    return answers


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


@pytest.mark.parametrize(("user", "password"), [(PLAIN_USER, WRONG_PASSWORD), ("nobody", PLAIN_PASSWORD)])
def test_plain_refusals(sasl_broker: BrokerProcess, user: str, password: str) -> None:
    [answer] = _raw_authenticate(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), "PLAIN", [f"\0{user}\0{password}".encode()])
    assert (answer.error_code, answer.error_message) == (58, "Authentication failed: Invalid username or password")


@pytest.mark.parametrize(("user", "password"), [(SCRAM_USER, WRONG_PASSWORD), ("nobody", SCRAM_PASSWORD)])
def test_scram_refusals(sasl_broker: BrokerProcess, user: str, password: str) -> None:
    client = RfcClient("sha512", user, password, "nonce-it")
    host, port = sasl_broker.bootstrap_of("SASL_PLAINTEXT").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        def call(request: Any, version: int, correlation_id: int) -> Any:
            sock.sendall(encode_request(request, version, correlation_id))
            return decode_response(_recv(sock, struct.unpack(">i", _recv(sock, 4))[0]), type(request).API_KEY,
                                   version)[1]

        assert call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1, 1).error_code == 0
        answer = call(SaslAuthenticateRequest(auth_bytes=client.first()), 2, 2)
        if answer.error_code == 0:
            answer = call(SaslAuthenticateRequest(auth_bytes=client.final(answer.auth_bytes)), 2, 3)
        assert answer.error_code == 58
        assert answer.error_message == ("Authentication failed during authentication due to invalid credentials "
                                        "with SASL mechanism SCRAM-SHA-512")
        assert sock.recv(1) == b""


def test_librdkafka_reports_the_failure_and_others_are_still_served(sasl_broker: BrokerProcess,
                                                                    new_topic: Callable[..., str]) -> None:
    errors: list[KafkaError] = []
    bad = ck_producer(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), **_ck_conf("SCRAM-SHA-512", password=WRONG_PASSWORD),
                      error_cb=errors.append)
    bad.produce(new_topic(), b"never")
    deadline = time.monotonic() + 15
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        bad.poll(0.2)
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-512" in e.str() for e in errors), errors
    close_clients()  # the refused producer would go on retrying (and logging) for the rest of the test
    topic = new_topic()
    assert _ck_round_trip(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), topic, _ck_conf("PLAIN")) == _values(topic)


# -- users at runtime, and after a restart ----------------------------------------------------------------
@pytest.mark.slow
def test_runtime_users_log_in_at_once_and_after_a_restart(sasl_broker: BrokerProcess,
                                                          new_topic: Callable[..., str]) -> None:
    _add_scram_user(sasl_broker, RUNTIME_USER, RUNTIME_PASSWORD)
    conf = _ck_conf("SCRAM-SHA-512", RUNTIME_USER, RUNTIME_PASSWORD)
    topic = new_topic()
    assert _ck_round_trip(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), topic, conf) == _values(topic)
    close_clients()
    sasl_broker.restart()
    admin = ck_admin(sasl_broker.bootstrap)  # held: a dropped AdminClient fails its futures
    described = {user: future.result(timeout=15) for user, future in
                 admin.describe_user_scram_credentials([RUNTIME_USER, SCRAM_USER]).items()}
    for description in described.values():
        assert sorted((i.mechanism, i.iterations) for i in description.scram_credential_infos) == \
            [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)]
    topic = new_topic()
    assert _ck_round_trip(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), topic, conf) == _values(topic)
    stored = next(sasl_broker.workdir.rglob("scram-credentials.json")).read_bytes()
    assert RUNTIME_PASSWORD.encode() not in stored and hashlib.sha512(RUNTIME_PASSWORD.encode()).digest() not in stored


# -- the figure: authentication handshakes per second ----------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_authentication_handshakes_per_second(sasl_broker: BrokerProcess, mechanism: str) -> None:
    """Connect, handshake, authenticate, close, in a loop for two seconds: the figure for the report."""
    count, started = 0, time.monotonic()
    while time.monotonic() - started < 2.0:
        if mechanism == "PLAIN":
            answers = _raw_authenticate(sasl_broker.bootstrap_of("SASL_PLAINTEXT"), "PLAIN",
                                        [f"\0{PLAIN_USER}\0{PLAIN_PASSWORD}".encode()])
        else:
            client = RfcClient("sha512", SCRAM_USER, SCRAM_PASSWORD, f"n{count}")
            host, port = sasl_broker.bootstrap_of("SASL_PLAINTEXT").split(":")
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                def call(request: Any, version: int, cid: int) -> Any:
                    sock.sendall(encode_request(request, version, cid))
                    return decode_response(_recv(sock, struct.unpack(">i", _recv(sock, 4))[0]),
                                           type(request).API_KEY, version)[1]

                call(SaslHandshakeRequest(mechanism=mechanism), 1, 1)
                first = call(SaslAuthenticateRequest(auth_bytes=client.first()), 2, 2)
                answers = [call(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)), 2, 3)]
        assert answers[-1].error_code == 0
        count += 1
    rate = count / (time.monotonic() - started)
    print(f"\n{mechanism}: {rate:.0f} authentication handshakes per second (one client, sequential)")
    assert rate > 5


# -- the admin tools over SASL ----------------------------------------------------------------------------
def _pybroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker.broker.cli", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_users_commands_over_sasl_with_command_config(sasl_broker: BrokerProcess, tmp_path: Path) -> None:
    plain = tmp_path / "plain.properties"
    plain.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     f'username="{PLAIN_USER}" password="{PLAIN_PASSWORD}";\n')
    common = ["--bootstrap-server", sasl_broker.bootstrap_of("SASL_PLAINTEXT"), "--command-config", str(plain), "--json"]
    added = _pybroker("users", "add", "dave", "--mechanism", "SCRAM-SHA-256", "--password", "dave-Pw-1",
                      "--iterations", "5000", *common)
    assert added.returncode == 0, added.stderr
    listed = json.loads(_pybroker("users", "list", "dave", *common).stdout)
    assert listed == [{"user": "dave", "mechanism": "SCRAM-SHA-256", "iterations": 5000}]
    scram = tmp_path / "scram.properties"  # dave now logs in with SCRAM through librdkafka-style keys
    scram.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.username=dave\nsasl.password=dave-Pw-1\n")
    as_dave = _pybroker("users", "delete", "dave", "--mechanism", "SCRAM-SHA-256", "--bootstrap-server",
                        sasl_broker.bootstrap_of("SASL_PLAINTEXT"), "--command-config", str(scram), "--json")
    assert as_dave.returncode == 0, as_dave.stderr
    gone = _pybroker("users", "list", "dave", *common)
    assert gone.returncode == 1 and "RESOURCE_NOT_FOUND" in gone.stderr
    plain.write_text(plain.read_text().replace(PLAIN_PASSWORD, WRONG_PASSWORD))
    refused = _pybroker("topics", "list", *common)
    assert refused.returncode == 1
    assert "authentication failed" in refused.stderr and WRONG_PASSWORD not in refused.stderr + refused.stdout


# -- OAUTHBEARER (confluent-kafka) ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Any]]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI to sign tokens")
    from tests.unit.broker.security.test_sasl_oauthbearer import Issuer

    workdir = tmp_path_factory.mktemp("oauth")
    issuer = Issuer(workdir)
    proc = _sasl_broker(workdir, {
        "sasl.enabled.mechanisms": "OAUTHBEARER", "auto.create.topics.enable": "true",
        "sasl.oauthbearer.jwks.endpoint.url": issuer.url,
        "sasl.oauthbearer.expected.issuer": "https://issuer.example",
        "sasl.oauthbearer.expected.audience": "kafka",
    })
    proc.start()
    try:
        yield proc, issuer
    finally:
        close_clients()
        if proc.is_running():
            proc.stop(expect_code=0)
        proc.close()


def _oauth_conf(token: str, expiry_s: float) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, expiry_s)}


def test_confluent_kafka_oauthbearer(oauth_broker: tuple[BrokerProcess, Any], new_topic: Callable[..., str]) -> None:
    broker, issuer = oauth_broker
    token = issuer.token(sub="svc-orders", lifetime_s=600, iss="https://issuer.example", aud="kafka")
    topic = new_topic()
    assert _ck_round_trip(broker.bootstrap_of("SASL_PLAINTEXT"), topic, _oauth_conf(token, time.time() + 600)) == _values(topic)
    errors: list[KafkaError] = []
    expired = issuer.token(sub="svc-orders", lifetime_s=-600, iss="https://issuer.example", aud="kafka")
    bad = ck_producer(broker.bootstrap_of("SASL_PLAINTEXT"), **_oauth_conf(expired, time.time() + 600), error_cb=errors.append)
    bad.produce(new_topic(), b"never")
    deadline = time.monotonic() + 15
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        bad.poll(0.2)
    assert any("invalid_token" in e.str() for e in errors), errors


# -- KIP-368 re-authentication -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_librdkafka_reauthenticates_before_the_session_expires(tmp_path: Path) -> None:
    """connections.max.reauth.ms=1500: librdkafka is told the lifetime and re-authenticates on the same
    connection (KIP-368) while producing for five seconds; nothing fails and the broker closes nothing."""
    proc = _sasl_broker(tmp_path, {"sasl.enabled.mechanisms": "SCRAM-SHA-512", "connections.max.reauth.ms": "1500",
                                 "auto.create.topics.enable": "true"})
    proc.start()
    try:
        _add_scram_user(proc, SCRAM_USER, SCRAM_PASSWORD)
        lines: list[str] = []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                lines.append(record.getMessage())

        logger = logging.getLogger("test_sasl.rdkafka")
        logger.addHandler(Collect())
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        errors: list[KafkaError] = []
        producer = ck_producer(proc.bootstrap_of("SASL_PLAINTEXT"), **_ck_conf("SCRAM-SHA-512"), debug="security", logger=logger,
                               error_cb=errors.append)
        sent, started = 0, time.monotonic()
        while time.monotonic() - started < 5:
            producer.produce("reauth", b"x")
            producer.poll(0.05)
            sent += 1
        assert producer.flush(15) == 0 and not errors
        assert sum("Auth in state REAUTH" in line for line in lines) >= 2, lines[:5]
        close_clients()
        assert "SASL session expired" not in proc.log_path.read_text(errors="replace")
    finally:
        proc.stop(expect_code=0)
        proc.close()
