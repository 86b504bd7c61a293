"""Every topic-level key, from its definition to the partition log and back out of DescribeConfigs.

`config/definitions.py` is the one source of a topic key's default; `config.log_config_fields` says which
LogConfig field each key is; storage's `LogConfig` repeats the defaults (storage may not import config).
These tests tie the three together: a key that is neither a field nor said not to be one, a field default
that differs from its definition, or a value that does not reach the log or come back out fails here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pybroker.broker.app import BrokerApp
from pybroker.broker.topics import log_config_for
from pybroker.config.broker_config import BrokerConfig, ConfigSource, parse_value
from pybroker.config.definitions import TOPIC
from pybroker.config.log_config_fields import LOG_CONFIG_FIELDS, NOT_LOG_CONFIG, log_config_defaults
from pybroker.config.types import render
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.storage.log_config import LogConfig
from tests.unit.broker.conftest import RawClient

TOPIC_RESOURCE = 2

#: a valid value other than the default, for every topic key (a new key without one fails the first test)
OTHER: dict[str, str] = {
    "cleanup.policy": "compact",
    "confluent.key.schema.validation": "true",
    "confluent.key.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
    "confluent.value.schema.validation": "true",
    "confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
    "compression.type": "zstd",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1000",
    "flush.messages": "10",
    "follower.replication.throttled.replicas": "0:1",
    "iceberg.commit.interval.ms": "1000",
    "iceberg.invalid.record.action": "drop",
    "iceberg.mode": "key_value",
    "iceberg.partition.spec": "(day(timestamp))",
    "leader.replication.throttled.replicas": "*",
    "flush.ms": "250",
    "index.interval.bytes": "1024",
    "max.compaction.lag.ms": "100000",
    "max.message.bytes": "2000000",
    "message.timestamp.after.max.ms": "1000",
    "message.timestamp.before.max.ms": "1000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "1000",
    "min.insync.replicas": "2",
    "preallocate": "true",
    "retention.bytes": "1000000",
    "retention.ms": "1000",
    "segment.bytes": "1000000",
    "segment.index.bytes": "1024",
    "segment.jitter.ms": "10",
    "segment.ms": "100000",
    "unclean.leader.election.enable": "true",
}


def _text(key: str, field_value: Any) -> str | None:
    """A LogConfig field's value as DescribeConfigs shows its key (a list key's field is comma-joined text)."""
    type_name = TOPIC[key].type
    return render(type_name, field_value.split(",") if type_name == "list" else field_value)


def test_every_topic_key_is_a_log_config_field_or_said_not_to_be() -> None:
    fields = {f.name for f in dataclasses.fields(LogConfig)}
    assert set(LOG_CONFIG_FIELDS) == fields
    assert len(set(LOG_CONFIG_FIELDS.values())) == len(LOG_CONFIG_FIELDS), "a key mapped to two fields"
    assert not set(LOG_CONFIG_FIELDS.values()) & NOT_LOG_CONFIG
    assert set(LOG_CONFIG_FIELDS.values()) | NOT_LOG_CONFIG == set(TOPIC)
    assert set(OTHER) == set(TOPIC)


def test_storage_defaults_are_the_definitions() -> None:
    assert LogConfig(**log_config_defaults()) == LogConfig()
    # a broker that sets nothing builds the same settings for a topic that overrides nothing
    assert log_config_for(BrokerConfig.load({}), {}) == LogConfig()
    for field, key in LOG_CONFIG_FIELDS.items():
        assert _text(key, getattr(LogConfig(), field)) == render(TOPIC[key].type, TOPIC[key].default), key


async def _described(client: RawClient, topic: str) -> dict[str, tuple[str | None, int]]:
    response = await client.call(DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=None)]), 4)
    result = response.results[0]
    assert result.error_code == 0, result.error_message
    return {entry.name: (entry.value, entry.config_source) for entry in result.configs}


async def test_every_topic_key_round_trips(client: RawClient, app: BrokerApp) -> None:
    """Definition default -> LogConfig field -> DescribeConfigs value, and an override the same way."""
    app.state.topics.create("plain", 1, 1, {})
    app.state.topics.create("set", 1, 1, dict(OTHER))
    plain, overridden = app.state.logs.get_log("plain", 0), app.state.logs.get_log("set", 0)
    assert plain is not None and overridden is not None
    described_plain, described_set = await _described(client, "plain"), await _described(client, "set")
    assert set(described_plain) == set(described_set) == set(TOPIC)
    fields_of = {key: field for field, key in LOG_CONFIG_FIELDS.items()}
    for key, definition in TOPIC.items():
        default_text = render(definition.type, definition.default)
        assert described_plain[key] == (default_text, ConfigSource.DEFAULT_CONFIG), key
        assert described_set[key] == (OTHER[key], ConfigSource.DYNAMIC_TOPIC_CONFIG), key
        assert parse_value(definition, OTHER[key]) != definition.default, f"{key}: OTHER is the default"
        if key in NOT_LOG_CONFIG:
            continue
        field = fields_of[key]
        assert _text(key, getattr(plain.config, field)) == default_text, key
        assert _text(key, getattr(overridden.config, field)) == OTHER[key], key
