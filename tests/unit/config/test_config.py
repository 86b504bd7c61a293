"""The config table, the properties loader and Kafka's topic-config resolution."""

from __future__ import annotations

import pytest

from pybroker.config.broker_config import BrokerConfig, ConfigSource, parse_listener, validate_topic_overrides
from pybroker.config.definitions import BROKER, TOPIC
from pybroker.config.properties import parse_properties
from pybroker.config.types import ConfigError


def test_properties_file_as_kafka_writes_it() -> None:
    text = """
# a comment
! another comment
log.dirs=/tmp/a,/tmp/b
num.partitions : 3
listeners PLAINTEXT://127.0.0.1:9093
long.value = one\\
    two
escaped\\=key=x
"""
    props = parse_properties(text)
    assert props["log.dirs"] == "/tmp/a,/tmp/b"
    assert props["num.partitions"] == "3"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9093"
    assert props["long.value"] == "onetwo"
    assert props["escaped=key"] == "x"


def test_layers_later_wins_and_unknown_keys_are_kept() -> None:
    config = BrokerConfig.load({"log.dirs": "a", "num.partitions": "2", "zookeeper.connect": "x"},
                               {"num.partitions": "4"})
    assert config.get("num.partitions") == 4
    assert config.log_dirs == ["a"]
    assert config.unknown == {"zookeeper.connect": "x"}
    assert config.source("num.partitions") == ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("message.max.bytes") == ConfigSource.DEFAULT_CONFIG


@pytest.mark.parametrize(
    ("key", "value"),
    [("num.partitions", "zero"), ("num.partitions", "0"), ("auto.create.topics.enable", "yes"),
     ("log.message.timestamp.type", "Wrong"), ("listeners", "nonsense"), ("socket.request.max.bytes", "-5")],
)
def test_bad_values_name_their_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load({"log.dirs": "a", key: value})
    assert info.value.key == key


def test_topic_resolution_override_then_synonym_then_default() -> None:
    config = BrokerConfig.load({"log.dirs": "a", "log.retention.hours": "1"})
    resolved = config.resolve_topic("retention.ms", {})
    assert resolved.value == 3_600_000
    assert resolved.source == ConfigSource.STATIC_BROKER_CONFIG
    assert config.resolve_topic("retention.ms", {"retention.ms": "5"}).value == 5
    assert config.resolve_topic("retention.ms", {"retention.ms": "5"}).source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    default = config.resolve_topic("segment.bytes", {})
    assert default.value == 1_073_741_824 and default.source == ConfigSource.DEFAULT_CONFIG
    assert [s[0] for s in config.resolve_topic("segment.ms", {}).synonyms] == ["log.roll.hours"]


def test_topic_override_validation() -> None:
    assert validate_topic_overrides({"cleanup.policy": "compact,delete"}) == {"cleanup.policy": "compact,delete"}
    with pytest.raises(ConfigError):
        validate_topic_overrides({"no.such.config": "1"})
    with pytest.raises(ConfigError):
        validate_topic_overrides({"cleanup.policy": "shred"})


@pytest.mark.parametrize("key", ["leader.replication.throttled.replicas", "follower.replication.throttled.replicas"])
def test_throttled_replica_lists_take_kafkas_forms(key: str) -> None:
    """kafka-reassign-partitions sets these (and --verify clears them): `*` or partition:broker pairs."""
    for good in ("*", "0:1,1:1", ""):
        assert validate_topic_overrides({key: good}) == {key: good}
    for bad in ("0", "a:1", "0:1,*", "0:-1"):
        with pytest.raises(ConfigError):
            validate_topic_overrides({key: bad})


def test_every_default_passes_its_own_validator() -> None:
    for definition in (*BROKER.values(), *TOPIC.values()):
        if definition.validator and definition.default is not None:
            assert definition.validator(definition.default) is None, definition.key


def test_topic_synonyms_are_broker_keys() -> None:
    for definition in TOPIC.values():
        for key, _ in definition.synonyms:
            assert key in BROKER, (definition.key, key)


def test_listener_parsing() -> None:
    assert parse_listener("PLAINTEXT://127.0.0.1:9092") == ("PLAINTEXT", "127.0.0.1", 9092)
    assert parse_listener("PLAINTEXT://[::1]:9092") == ("PLAINTEXT", "::1", 9092)
    with pytest.raises(ConfigError):
        parse_listener("127.0.0.1:9092")
