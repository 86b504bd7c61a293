"""SASL_SSL on a real `pybroker start`: SASL (PLAIN, SCRAM-SHA-512) inside TLS, with every stock client,
beside a PLAINTEXT listener. Certificates are made for the module with `openssl` (tests/certs.py).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from aiokafka.structs import TopicPartition as AioTopicPartition

from tests.certs import KEY_PASSWORD, CertSet, make_certs, openssl_available
from tests.integration.brokers import BrokerProcess, free_port
from tests.integration.clients import close_clients, kp_consumer, kp_producer
from tests.integration.test_sasl import (
    CREDENTIALS,
    PASSWORDS,
    PLAIN_PASSWORD,
    PLAIN_USER,
    RECORDS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    _add_scram_user,
    _ck_round_trip,
    _values,
)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not openssl_available(), reason="needs the openssl command")]
KCAT = shutil.which("kcat") or shutil.which("kafkacat")
MECHANISMS = ["PLAIN", "SCRAM-SHA-512"]


class SaslSslBroker(BrokerProcess):
    """PLAINTEXT (the readiness check, user creation) and SASL_SSL."""

    def __init__(self, workdir: Path, overrides: dict[str, str]) -> None:
        super().__init__(workdir, overrides)
        self.sasl_ssl_port = free_port()

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_ssl_port}"

    def command(self) -> list[str]:
        cmd = super().command()
        at = cmd.index("--listeners") + 1
        cmd[at] = f"{cmd[at]},SASL_SSL://{self.host}:{self.sasl_ssl_port}"
        return cmd


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: CertSet) -> Iterator[SaslSslBroker]:
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
    proc = SaslSslBroker(tmp_path_factory.mktemp("sasl-ssl"), {
        "auto.create.topics.enable": "true",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_keystore_encrypted),
        "ssl.key.password": KEY_PASSWORD,
    })
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


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(broker: SaslSslBroker, certs: CertSet, new_topic: Callable[..., str], mechanism: str) -> None:
    user, password = CREDENTIALS[mechanism]
    conf: dict[str, Any] = {"security_protocol": "SASL_SSL", "ssl_cafile": str(certs.ca), "ssl_check_hostname": True,
                            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = new_topic()
    with kp_producer(broker.sasl_ssl_bootstrap, **conf) as producer:
        for value in _values(topic):
            producer.send(topic, value, partition=0)
        producer.flush(timeout=20)
    got: list[bytes] = []
    with kp_consumer(broker.sasl_ssl_bootstrap, **conf, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=300).values():
                got += [r.value for r in batch]
    assert got == _values(topic)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(broker: SaslSslBroker, certs: CertSet, new_topic: Callable[..., str],
                         mechanism: str) -> None:
    user, password = CREDENTIALS[mechanism]
    conf = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca), "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}
    topic = new_topic()
    assert _ck_round_trip(broker.sasl_ssl_bootstrap, topic, conf) == _values(topic)


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_aiokafka(broker: SaslSslBroker, certs: CertSet, new_topic: Callable[..., str], mechanism: str) -> None:
    user, password = CREDENTIALS[mechanism]
    conf: dict[str, Any] = {"bootstrap_servers": broker.sasl_ssl_bootstrap, "security_protocol": "SASL_SSL",
                            "ssl_context": create_ssl_context(cafile=str(certs.ca)), "sasl_mechanism": mechanism,
                            "sasl_plain_username": user, "sasl_plain_password": password,
                            "request_timeout_ms": 10_000}
    topic = new_topic()
    producer = AIOKafkaProducer(**conf)
    await asyncio.wait_for(producer.start(), 15)
    try:
        for value in _values(topic):
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await asyncio.wait_for(producer.stop(), 15)
    consumer = AIOKafkaConsumer(**conf, enable_auto_commit=False, fetch_max_wait_ms=200)
    await asyncio.wait_for(consumer.start(), 15)
    got: list[bytes] = []
    try:
        tp = AioTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 20
        while len(got) < RECORDS and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=300)).values():
                got += [m.value for m in batch]
    finally:
        await asyncio.wait_for(consumer.stop(), 15)
    assert got == _values(topic)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat(broker: SaslSslBroker, certs: CertSet, new_topic: Callable[..., str], mechanism: str) -> None:
    assert KCAT is not None
    user, password = CREDENTIALS[mechanism]
    security = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={certs.ca}",
                "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}",
                "-X", "socket.timeout.ms=10000"]
    topic = new_topic()
    values = [v.decode() for v in _values(topic)]
    produced = subprocess.run([KCAT, "-P", "-b", broker.sasl_ssl_bootstrap, "-t", topic, "-p", "0", *security],
                              input="\n".join(values) + "\n", capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr[-2000:]
    consumed = subprocess.run([KCAT, "-C", "-b", broker.sasl_ssl_bootstrap, "-t", topic, "-o", "beginning", "-e",
                               "-c", str(RECORDS), *security], capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr[-2000:]
    assert consumed.stdout.split() == values


def test_admin_tools_over_sasl_ssl(broker: SaslSslBroker, certs: CertSet, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n"
                      "sasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";\n')
    result = subprocess.run([sys.executable, "-m", "pybroker.broker.cli", "users", "list", "--bootstrap-server",
                             broker.sasl_ssl_bootstrap, "--command-config", str(config), "--json"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert {"user": SCRAM_USER, "mechanism": "SCRAM-SHA-512", "iterations": 4096} in json.loads(result.stdout)
    config.write_text(config.read_text().replace(f"ssl.truststore.location={certs.ca}\n", ""))  # system CAs only
    refused = subprocess.run([sys.executable, "-m", "pybroker.broker.cli", "topics", "list", "--bootstrap-server",
                              broker.sasl_ssl_bootstrap, "--command-config", str(config)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 1 and "TLS with the broker" in refused.stderr
