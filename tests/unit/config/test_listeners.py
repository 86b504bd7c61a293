"""Listeners, the security protocol map and advertised listeners, checked as Kafka checks them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.config.broker_config import BrokerConfig, validate_dynamic_broker
from pybroker.config.listeners import Listener
from pybroker.config.types import ConfigError


def _load(tmp_path: Path, **keys: str) -> BrokerConfig:
    return BrokerConfig.load({"log.dirs": str(tmp_path), **keys})


def test_several_listeners_with_kafkas_default_map(tmp_path: Path) -> None:
    config = _load(tmp_path, listeners="PLAINTEXT://127.0.0.1:9092,SSL://:9093,sasl_ssl://[::1]:9094")
    assert config.listener_specs() == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
                                       Listener("SSL", "", 9093, "SSL"),
                                       Listener("SASL_SSL", "::1", 9094, "SASL_SSL")]
    assert [spec.tls for spec in config.listener_specs()] == [False, True, True]


def test_custom_names_through_the_map(tmp_path: Path) -> None:
    config = _load(tmp_path, listeners="INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093",
                   **{"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
                      "advertised.listeners": "EXTERNAL://kafka.example.com:443"})
    assert [(s.name, s.security_protocol) for s in config.listener_specs()] == [
        ("INTERNAL", "PLAINTEXT"), ("EXTERNAL", "SASL_SSL")]
    # a listener not advertised tells its own address
    assert config.advertised_addresses() == {"INTERNAL": ("127.0.0.1", 9092),
                                             "EXTERNAL": ("kafka.example.com", 443)}
    assert config.listener_specs()[1].config_prefix == "listener.name.external."


@pytest.mark.parametrize(("keys", "named", "says"), [
    ({"listeners": "EXTERNAL://:9093"}, "listener.security.protocol.map", "EXTERNAL"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners", "different name"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "listeners", "different port"),
    ({"listeners": "A://:1", "listener.security.protocol.map": "A:TLS"}, "listener.security.protocol.map", "TLS"),
    ({"listeners": "A://:1", "listener.security.protocol.map": "A"}, "listener.security.protocol.map", "NAME:"),
    ({"listeners": "SSL://:1", "advertised.listeners": "PLAINTEXT://h:1"}, "advertised.listeners", "PLAINTEXT"),
    ({"listeners": "127.0.0.1:9092"}, "listeners", "NAME://HOST:PORT"),
])
def test_bad_listener_configs_name_the_key(tmp_path: Path, keys: dict[str, str], named: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, **keys)
    assert caught.value.key == named
    assert says in caught.value.message


def test_port_zero_may_repeat(tmp_path: Path) -> None:
    assert len(_load(tmp_path, listeners="PLAINTEXT://:0,SSL://:0").listener_specs()) == 2


def test_listener_prefixed_keys_resolve_and_stay_out_of_unknown(tmp_path: Path) -> None:
    config = _load(tmp_path, **{"ssl.client.auth": "requested", "listener.name.external.ssl.client.auth": "required",
                                "listener.name.external.ssl.key.password": "secret",
                                "listener.name.external.not.a.key": "x"})
    assert config.listener_get("EXTERNAL", "ssl.client.auth") == "required"
    assert config.listener_get("INTERNAL", "ssl.client.auth") == "requested"
    assert config.listener_get("INTERNAL", "ssl.principal.mapping.rules") == "DEFAULT"
    assert "listener.name.external.ssl.client.auth" in config.explicit
    assert config.unknown == {"listener.name.external.not.a.key": "x"}
    assert config.redacted()["listener.name.external.ssl.key.password"] == "[hidden]"


def test_prefixed_values_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, **{"listener.name.external.ssl.client.auth": "sometimes"})
    assert caught.value.key == "listener.name.external.ssl.client.auth"


def test_key_store_keys_may_change_at_runtime_per_listener() -> None:
    assert validate_dynamic_broker({"listener.name.external.ssl.keystore.location": "/x.pem"})
    with pytest.raises(ConfigError):
        validate_dynamic_broker({"listener.name.external.ssl.client.auth": "required"})
    with pytest.raises(ConfigError):
        validate_dynamic_broker({"listener.name.external.listeners": "x"})


def test_a_plaintext_broker_loads_leftover_kafka_ssl_keys(tmp_path: Path) -> None:
    config = _load(tmp_path, **{"ssl.keystore.type": "JKS", "ssl.keystore.location": "/etc/kafka/ks.jks",
                                "ssl.keystore.password": "x", "ssl.truststore.type": "jks",
                                "ssl.enabled.protocols": "TLSv1.1,TLSv1.2", "ssl.protocol": "TLS"})
    assert config.unknown == {}
    assert [spec.tls for spec in config.listener_specs()] == [False]


def test_a_controller_listener_speaks_plaintext_unless_the_map_is_set(tmp_path: Path) -> None:
    keys = {"listeners": "PLAINTEXT://:9092,CTRL://:9093", "controller.listener.names": "CTRL"}
    assert [s.security_protocol for s in _load(tmp_path, **keys).listener_specs()] == ["PLAINTEXT", "PLAINTEXT"]
    with pytest.raises(ConfigError):
        _load(tmp_path, **keys, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"})
