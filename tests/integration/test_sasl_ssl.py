"""SASL_SSL on a real `pybroker start`: SASL (PLAIN, SCRAM-SHA-512) inside TLS, with every stock client,
beside a PLAINTEXT listener. Certificates are made for the module with `openssl` (tests/certs.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka.helpers import create_ssl_context

from tests.certs import KEY_PASSWORD, CertSet, make_certs, openssl_available
from tests.integration.brokers import BrokerProcess
from tests.integration.secure_clients import KCAT, ak_round_trip, kcat_round_trip, kp_round_trip
from tests.integration.test_sasl import (
    PLAIN_PASSWORD,
    PLAIN_USER,
    SCRAM_PASSWORD,
    SCRAM_USER,
    _ck_conf,
    _ck_round_trip,
    _kp_conf,
    _values,
    serving_users,
)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not openssl_available(), reason="needs the openssl command")]
MECHANISMS = ["PLAIN", "SCRAM-SHA-512"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: CertSet) -> Iterator[BrokerProcess]:
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
    # PLAINTEXT (the readiness check, user creation) and SASL_SSL
    proc = BrokerProcess(tmp_path_factory.mktemp("sasl-ssl"), extra_listeners=["SASL_SSL"], overrides={
        "auto.create.topics.enable": "true",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_keystore_encrypted),
        "ssl.key.password": KEY_PASSWORD,
    })
    with serving_users(proc):
        yield proc


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(broker: BrokerProcess, certs: CertSet, new_topic: Callable[..., str], mechanism: str) -> None:
    conf = {**_kp_conf(mechanism, "SASL_SSL"), "ssl_cafile": str(certs.ca), "ssl_check_hostname": True}
    topic = new_topic()
    assert kp_round_trip(broker.bootstrap_of("SASL_SSL"), topic, conf, _values(topic),
                         subscribe=True) == _values(topic)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(broker: BrokerProcess, certs: CertSet, new_topic: Callable[..., str],
                         mechanism: str) -> None:
    conf = {**_ck_conf(mechanism, protocol="SASL_SSL"), "ssl.ca.location": str(certs.ca)}
    topic = new_topic()
    assert _ck_round_trip(broker.bootstrap_of("SASL_SSL"), topic, conf) == _values(topic)


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_aiokafka(broker: BrokerProcess, certs: CertSet, new_topic: Callable[..., str], mechanism: str) -> None:
    conf = {**_kp_conf(mechanism, "SASL_SSL"), "ssl_context": create_ssl_context(cafile=str(certs.ca))}
    topic = new_topic()
    assert await ak_round_trip(broker.bootstrap_of("SASL_SSL"), topic, conf, _values(topic)) == _values(topic)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat(broker: BrokerProcess, certs: CertSet, new_topic: Callable[..., str], mechanism: str) -> None:
    conf = {**_ck_conf(mechanism, protocol="SASL_SSL"), "ssl.ca.location": str(certs.ca)}
    topic = new_topic()
    values = [v.decode() for v in _values(topic)]
    assert kcat_round_trip(broker.bootstrap_of("SASL_SSL"), topic, conf, values) == values


def test_admin_tools_over_sasl_ssl(broker: BrokerProcess, certs: CertSet, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n"
                      "sasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";\n')
    result = subprocess.run([sys.executable, "-m", "pybroker.broker.cli", "users", "list", "--bootstrap-server",
                             broker.bootstrap_of("SASL_SSL"), "--command-config", str(config), "--json"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert {"user": SCRAM_USER, "mechanism": "SCRAM-SHA-512", "iterations": 4096} in json.loads(result.stdout)
    config.write_text(config.read_text().replace(f"ssl.truststore.location={certs.ca}\n", ""))  # system CAs only
    refused = subprocess.run([sys.executable, "-m", "pybroker.broker.cli", "topics", "list", "--bootstrap-server",
                              broker.bootstrap_of("SASL_SSL"), "--command-config", str(config)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 1 and "TLS with the broker" in refused.stderr
