"""Which topic-level config key is which field of a partition log's settings (storage's `LogConfig`).

`config/definitions.py` is the one source of a topic key's default; this module says what the storage
layer calls each key, so the broker can build a `LogConfig` from resolved topic values (override, broker
synonym, default) without the storage layer ever reading config keys, and without config importing
storage (config depends on nothing). `log_config_defaults()` is what a topic with no override and a
broker with no synonym set gets; a test checks it equals `LogConfig()`'s field defaults and that every
topic-level key round-trips to its field and back out of DescribeConfigs.

Pure functions over plain values: any thread may call them (the broker calls them on the event loop or
on the worker thread that creates a topic).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pybroker.config.definitions import TOPIC_DEFS

#: LogConfig field <- topic config key
LOG_CONFIG_FIELDS: dict[str, str] = {
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "segment_jitter_ms": "segment.jitter.ms",
    "index_interval_bytes": "index.interval.bytes",
    "max_index_bytes": "segment.index.bytes",
    "flush_interval_messages": "flush.messages",
    "flush_interval_ms": "flush.ms",
    "message_timestamp_type": "message.timestamp.type",
    "message_timestamp_before_max_ms": "message.timestamp.before.max.ms",
    "message_timestamp_after_max_ms": "message.timestamp.after.max.ms",
    "max_message_bytes": "max.message.bytes",
    "cleanup_policy": "cleanup.policy",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "file_delete_delay_ms": "file.delete.delay.ms",
    "preallocate": "preallocate",
    "delete_retention_ms": "delete.retention.ms",
    "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio",
    "min_compaction_lag_ms": "min.compaction.lag.ms",
    "max_compaction_lag_ms": "max.compaction.lag.ms",
}

#: topic-level keys a partition log does not act on: accepted and described, never a LogConfig field
NOT_LOG_CONFIG: frozenset[str] = frozenset({
    "compression.type",  # accepted and described; stored batches keep the codec the producer chose
    "min.insync.replicas",  # one broker: accepted for compatibility
    "unclean.leader.election.enable",  # one broker: accepted for compatibility
    "leader.replication.throttled.replicas",  # one broker: accepted (kafka-reassign-partitions sets it)
    "follower.replication.throttled.replicas",  # one broker: accepted (kafka-reassign-partitions sets it)
    # schema validation on produce: read by the partition layer's schema check (broker/schema_registry/)
    "confluent.key.schema.validation",
    "confluent.value.schema.validation",
    "confluent.key.subject.name.strategy",
    "confluent.value.subject.name.strategy",
    "iceberg.mode",  # the Iceberg worker's (broker/iceberg_tables.py), not the log's
    "iceberg.commit.interval.ms",
    "iceberg.partition.spec",
    "iceberg.invalid.record.action",
})

#: a resolved value whose LogConfig field holds another form: field -> conversion
_AS_FIELD: dict[str, Callable[[Any], Any]] = {
    "cleanup_policy": ",".join,  # a list key; LogConfig keeps Kafka's comma-separated text
}


def log_config_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """LogConfig's keyword arguments from resolved topic values (`BrokerConfig.topic_values`)."""
    fields = {name: values[key] for name, key in LOG_CONFIG_FIELDS.items()}
    for name, convert in _AS_FIELD.items():
        fields[name] = convert(fields[name])
    return fields


def log_config_defaults() -> dict[str, Any]:
    """LogConfig's keyword arguments when every topic key has its definition's default."""
    return log_config_fields({d.key: d.default for d in TOPIC_DEFS})
