"""The connector's options, checked once on the driver into frozen dataclasses the rest of the code trusts.

Why tables: the names and meanings are Spark's Kafka source and sink options, and every option the
connector does not implement must be refused with a message saying so (a silently ignored option is a
pipeline that quietly does something else). So the accepted options, the refused ones with their reasons,
and the `kafka.*` client settings passed on to the client library are each one table, and the parser is
one loop over them. Spark hands options over case-insensitively (lower-cased keys); messages use
Spark's spelling.

Pure Python: no Spark, no client library.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pybroker.clients.spark.offsets import (
    EARLIEST,
    LATEST,
    OptionError,
    TopicPartition,
    parse_assign,
    parse_partition_values,
)

BOOTSTRAP = "kafka.bootstrap.servers"


class Scope(Enum):
    """Where an option means something."""

    BOTH = "batch and streaming queries"
    BATCH = "batch queries"
    STREAM = "streaming queries"


#: reader options we implement: Spark's spelling -> where it applies
READ_OPTIONS: dict[str, Scope] = {
    BOOTSTRAP: Scope.BOTH,
    "subscribe": Scope.BOTH,
    "subscribePattern": Scope.BOTH,
    "assign": Scope.BOTH,
    "startingOffsets": Scope.BOTH,
    "startingTimestamp": Scope.BOTH,
    "startingOffsetsByTimestamp": Scope.BOTH,
    "startingOffsetsByTimestampStrategy": Scope.BOTH,
    "endingOffsets": Scope.BATCH,
    "endingTimestamp": Scope.BATCH,
    "endingOffsetsByTimestamp": Scope.BATCH,
    "failOnDataLoss": Scope.BOTH,
    "maxOffsetsPerTrigger": Scope.STREAM,
    "minPartitions": Scope.BOTH,
    "includeHeaders": Scope.BOTH,
    "kafkaConsumer.pollTimeoutMs": Scope.BOTH,
    "fetchOffset.numRetries": Scope.BOTH,
    "fetchOffset.retryIntervalMs": Scope.BOTH,
}

#: writer options we implement (besides the kafka.* producer settings). `exactlyOnce`: true / false / unset
#: (exactly-once when the brokers allow two-phase commit); `transactionalIdPrefix`: how the sink's transactional
#: ids and marker groups start (for ACLs); `exactlyOnce.failOnceAfterWrite`: a test aid, attempt 0 of that Spark
#: partition dies after sending its rows (see `exactly_once`)
WRITE_OPTIONS: tuple[str, ...] = (BOOTSTRAP, "topic", "exactlyOnce", "transactionalIdPrefix",
                                  "exactlyOnce.failOnceAfterWrite")
#: the exactly-once sink's transactional ids and marker groups start with this (see `exactly_once`)
DEFAULT_TRANSACTIONAL_ID_PREFIX = "pybroker-spark"
#: what a reader gets without `kafka.isolation.level`: as Spark's Kafka source, only committed records
DEFAULT_ISOLATION_LEVEL = "read_committed"

#: options Spark itself passes to a data source along with the user's (DataStreamWriter's own settings)
SPARK_OWN_OPTIONS: tuple[str, ...] = ("checkpointLocation", "queryName")

#: Spark Kafka options this connector refuses, and why
UNSUPPORTED_OPTIONS: dict[str, str] = {
    "minOffsetsPerTrigger": "Python data sources cannot wait for a minimum batch size; use a trigger interval",
    "maxTriggerDelay": "it only works together with minOffsetsPerTrigger, which is not supported",
    "maxRecordsPerPartition": "use minPartitions to split large offset ranges",
    "groupIdPrefix": "the connector never joins a consumer group: offsets live in Spark's checkpoint",
    "kafka.group.id": "the connector never joins a consumer group: offsets live in Spark's checkpoint",
    "kafka.auto.offset.reset": "use startingOffsets; out-of-range offsets follow failOnDataLoss",
    "kafka.enable.auto.commit": "the connector never commits offsets to the broker",
    "kafka.key.deserializer": "keys are always returned as binary; cast them in Spark",
    "kafka.value.deserializer": "values are always returned as binary; cast them in Spark",
    "kafka.key.serializer": "the key column is written as bytes (string columns as UTF-8)",
    "kafka.value.serializer": "the value column is written as bytes (string columns as UTF-8)",
    "kafka.interceptor.classes": "Java interceptors cannot run in a Python client",
    "kafka.sasl.mechanism": "pybroker serves PLAINTEXT only",
    "kafka.sasl.jaas.config": "pybroker serves PLAINTEXT only",
    "kafka.ssl.truststore.location": "pybroker serves PLAINTEXT only",
    "kafka.ssl.keystore.location": "pybroker serves PLAINTEXT only",
    "kafka.transactional.id": "the exactly-once sink gives each task its own transactional id "
                              "(set transactionalIdPrefix to choose how they start)",
}


# -- kafka.* client settings ---------------------------------------------------------------------------
def _int_at_least(minimum: int) -> Callable[[str, str], int]:
    def parse(name: str, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise OptionError(f"option {name!r} must be an integer, got {text!r}") from None
        if value < minimum:
            raise OptionError(f"option {name!r} must be >= {minimum}, got {value}")
        return value
    return parse


def _choice(*allowed: str) -> Callable[[str, str], str]:
    def parse(name: str, text: str) -> str:
        value = text.strip().lower()
        if value not in allowed:
            raise OptionError(f"option {name!r} must be one of {', '.join(allowed)}; got {text!r}")
        return value
    return parse


def _boolean(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option {name!r} must be true or false, got {text!r}")
    return value == "true"


def _text(name: str, text: str) -> str:
    return text


def _acks(name: str, text: str) -> int | str:
    value = text.strip().lower()
    if value in ("all", "-1"):
        return "all"
    if value in ("0", "1"):
        return int(value)
    raise OptionError(f"option {name!r} must be all, -1, 0 or 1; got {text!r}")


def _compression(name: str, text: str) -> str | None:
    value = _choice("none", "gzip", "snappy", "lz4", "zstd")(name, text)
    return None if value == "none" else value


def _plaintext(name: str, text: str) -> str:
    return _choice("plaintext")(name, text).upper()


@dataclass(frozen=True, slots=True)
class ClientSetting:
    """A Kafka client property (`kafka.` + its Java name) and the kafka-python argument it becomes."""

    kwarg: str
    parse: Callable[[str, str], Any]


COMMON_SETTINGS: dict[str, ClientSetting] = {
    "kafka.client.id": ClientSetting("client_id", _text),
    "kafka.request.timeout.ms": ClientSetting("request_timeout_ms", _int_at_least(1)),
    "kafka.reconnect.backoff.ms": ClientSetting("reconnect_backoff_ms", _int_at_least(0)),
    "kafka.reconnect.backoff.max.ms": ClientSetting("reconnect_backoff_max_ms", _int_at_least(0)),
    "kafka.retry.backoff.ms": ClientSetting("retry_backoff_ms", _int_at_least(0)),
    "kafka.metadata.max.age.ms": ClientSetting("metadata_max_age_ms", _int_at_least(0)),
    "kafka.connections.max.idle.ms": ClientSetting("connections_max_idle_ms", _int_at_least(0)),
    "kafka.security.protocol": ClientSetting("security_protocol", _plaintext),
}
CONSUMER_SETTINGS: dict[str, ClientSetting] = {
    **COMMON_SETTINGS,
    "kafka.isolation.level": ClientSetting("isolation_level", _choice("read_uncommitted", "read_committed")),
    "kafka.fetch.max.bytes": ClientSetting("fetch_max_bytes", _int_at_least(1)),
    "kafka.fetch.min.bytes": ClientSetting("fetch_min_bytes", _int_at_least(1)),
    "kafka.fetch.max.wait.ms": ClientSetting("fetch_max_wait_ms", _int_at_least(0)),
    "kafka.max.partition.fetch.bytes": ClientSetting("max_partition_fetch_bytes", _int_at_least(1)),
    "kafka.max.poll.records": ClientSetting("max_poll_records", _int_at_least(1)),
    "kafka.check.crcs": ClientSetting("check_crcs", _boolean),
}
PRODUCER_SETTINGS: dict[str, ClientSetting] = {
    **COMMON_SETTINGS,
    "kafka.acks": ClientSetting("acks", _acks),
    "kafka.linger.ms": ClientSetting("linger_ms", _int_at_least(0)),
    "kafka.batch.size": ClientSetting("batch_size", _int_at_least(0)),
    "kafka.compression.type": ClientSetting("compression_type", _compression),
    "kafka.max.request.size": ClientSetting("max_request_size", _int_at_least(1)),
    "kafka.retries": ClientSetting("retries", _int_at_least(0)),
    "kafka.delivery.timeout.ms": ClientSetting("delivery_timeout_ms", _int_at_least(1)),
    "kafka.max.block.ms": ClientSetting("max_block_ms", _int_at_least(0)),
    "kafka.enable.idempotence": ClientSetting("enable_idempotence", _boolean),
    "kafka.max.in.flight.requests.per.connection":
        ClientSetting("max_in_flight_requests_per_connection", _int_at_least(1)),
}


# -- the parsed forms ----------------------------------------------------------------------------------
class BoundKind(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSETS = "offsets"        # per-partition offsets, -2/-1 allowed
    TIMESTAMP = "timestamp"    # one timestamp for every partition
    TIMESTAMPS = "timestamps"  # per-partition timestamps


@dataclass(frozen=True, slots=True)
class OffsetBound:
    """Where a read starts or ends, before it is resolved against the broker's offsets."""

    kind: BoundKind
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None

    @property
    def option(self) -> str:
        """How the user said it, for messages."""
        return self.kind.value


@dataclass(frozen=True, slots=True)
class Subscription:
    """Exactly one of `subscribe` (topics), `subscribePattern` (a regex), `assign` (partitions)."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        if self.assigned:
            return f"assign {[f'{tp.topic}-{tp.partition}' for tp in self.assigned]}"
        return f"subscribe {list(self.topics)}"

    def matches(self, topic: str) -> bool:
        """For `subscribePattern`: the whole topic name must match, as Java's `Pattern.matches` does."""
        return self.pattern is not None and re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class ReadOptions:
    bootstrap_servers: tuple[str, ...]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    #: when no record is at or after a starting timestamp: "error" fails, "latest" starts at the end
    timestamp_strategy: str = "error"
    consumer_config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WriteOptions:
    bootstrap_servers: tuple[str, ...]
    topic: str | None
    producer_config: Mapping[str, Any] = field(default_factory=dict)
    #: `exactlyOnce`: True / False as given; None (unset) means "when the broker supports it"
    exactly_once: bool | None = None
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    #: a test aid: attempt 0 of this Spark partition fails after sending its rows (exactly-once only)
    fail_once_after_write: int | None = None


# -- parsing -------------------------------------------------------------------------------------------
def _canonical(options: Mapping[str, str], known: Mapping[str, object]) -> dict[str, str]:
    """Spark's spelling for every given key (Spark lower-cases them), refusing what we do not know."""
    spelled = {name.lower(): name for name in known}
    ignored = {name.lower() for name in SPARK_OWN_OPTIONS}
    result: dict[str, str] = {}
    for key, value in options.items():
        lowered = key.lower()
        if lowered in ignored:
            continue
        if lowered in spelled:
            result[spelled[lowered]] = str(value)
            continue
        refused = {name.lower(): (name, why) for name, why in UNSUPPORTED_OPTIONS.items()}.get(lowered)
        if refused is not None:
            raise OptionError(f"option {refused[0]!r} is not supported by the pybroker connector: {refused[1]}")
        if lowered.startswith("kafka."):
            settable = sorted(n for n in known if n.startswith("kafka.") and n != BOOTSTRAP)
            raise OptionError(f"Kafka client setting {key!r} is not supported by the pybroker connector; "
                              f"supported here: {', '.join(settable)}")
        supported = [*sorted(n for n in known if not n.startswith("kafka.")), BOOTSTRAP, "kafka.*"]
        raise OptionError(f"unknown option {key!r} for the pybroker connector; known options: "
                          f"{', '.join(supported)}")
    return result


def _bootstrap(given: Mapping[str, str]) -> tuple[str, ...]:
    servers = tuple(s.strip() for s in given.get(BOOTSTRAP, "").split(",") if s.strip())
    if not servers:
        raise OptionError(f"option {BOOTSTRAP!r} is required: a comma-separated list of host:port")
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OptionError(f"option {BOOTSTRAP!r}: {server!r} is not host:port")
    return servers


def _client_config(given: Mapping[str, str], table: Mapping[str, ClientSetting]) -> dict[str, Any]:
    return {table[name].kwarg: table[name].parse(name, value) for name, value in given.items() if name in table}


def _subscription(given: Mapping[str, str]) -> Subscription:
    chosen = [name for name in ("subscribe", "subscribePattern", "assign") if name in given]
    if len(chosen) != 1:
        said = f"got {', '.join(chosen)}" if chosen else "got none"
        raise OptionError(f"exactly one of 'subscribe', 'subscribePattern' or 'assign' must be set ({said})")
    name = chosen[0]
    text = given[name].strip()
    if name == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise OptionError("option 'subscribe' must list at least one topic (comma-separated)")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        if not text:
            raise OptionError("option 'subscribePattern' must be a non-empty regular expression")
        try:
            re.compile(text)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
        return Subscription(pattern=text)
    return Subscription(assigned=parse_assign(text))


def _bound(given: Mapping[str, str], *, starting: bool, streaming: bool) -> OffsetBound:
    """Spark's precedence: one global timestamp, then per-partition timestamps, then offsets."""
    prefix = "starting" if starting else "ending"
    timestamp_name, per_partition_name, offsets_name = (
        f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp", f"{prefix}Offsets")
    if timestamp_name in given:
        return OffsetBound(BoundKind.TIMESTAMP, timestamp=_int_at_least(0)(timestamp_name, given[timestamp_name]))
    if per_partition_name in given:
        values = parse_partition_values(given[per_partition_name], per_partition_name, minimum=0,
                                        meaning="timestamp")
        return OffsetBound(BoundKind.TIMESTAMPS, offsets=values)
    default = ("latest" if streaming else "earliest") if starting else "latest"
    text = given.get(offsets_name, default).strip()
    if text.lower() in ("earliest", "latest"):
        kind = BoundKind(text.lower())
        if not streaming and kind is (BoundKind.LATEST if starting else BoundKind.EARLIEST):
            raise OptionError(f"option {offsets_name!r} cannot be {kind.value!r} for batch queries")
        return OffsetBound(kind)
    offsets = parse_partition_values(text, offsets_name, minimum=EARLIEST, meaning="offset")
    refused = LATEST if starting else EARLIEST
    if not streaming and refused in offsets.values():
        bad = next(tp for tp, o in offsets.items() if o == refused)
        word = "latest" if starting else "earliest"
        raise OptionError(f"option {offsets_name!r}: {refused} ({word}) for {bad.topic}-{bad.partition} "
                          "is not allowed in batch queries")
    return OffsetBound(BoundKind.OFFSETS, offsets=offsets)


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check every option of a `read`/`readStream` and return them parsed; raise OptionError otherwise."""
    given = _canonical(options, {**READ_OPTIONS, **CONSUMER_SETTINGS})
    scope = Scope.STREAM if streaming else Scope.BATCH
    for name in given:
        applies = READ_OPTIONS.get(name, Scope.BOTH)
        if applies not in (Scope.BOTH, scope):
            raise OptionError(f"option {name!r} only applies to {applies.value}, not {scope.value}")
    strategy = _choice("error", "latest")(
        "startingOffsetsByTimestampStrategy", given.get("startingOffsetsByTimestampStrategy", "error"))
    ints = {name: _int_at_least(minimum)(name, given[name]) for name, minimum in (
        ("maxOffsetsPerTrigger", 1), ("minPartitions", 1), ("kafkaConsumer.pollTimeoutMs", 1),
        ("fetchOffset.numRetries", 0), ("fetchOffset.retryIntervalMs", 0)) if name in given}
    return ReadOptions(
        bootstrap_servers=_bootstrap(given),
        subscription=_subscription(given),
        starting=_bound(given, starting=True, streaming=streaming),
        ending=OffsetBound(BoundKind.LATEST) if streaming else _bound(given, starting=False, streaming=False),
        fail_on_data_loss=_boolean("failOnDataLoss", given.get("failOnDataLoss", "true")),
        max_offsets_per_trigger=ints.get("maxOffsetsPerTrigger"),
        min_partitions=ints.get("minPartitions"),
        include_headers=_boolean("includeHeaders", given.get("includeHeaders", "false")),
        poll_timeout_ms=ints.get("kafkaConsumer.pollTimeoutMs", 120_000),
        fetch_offset_retries=ints.get("fetchOffset.numRetries", 3),
        fetch_offset_retry_interval_ms=ints.get("fetchOffset.retryIntervalMs", 1000),
        timestamp_strategy=strategy,
        consumer_config={"isolation_level": DEFAULT_ISOLATION_LEVEL, **_client_config(given, CONSUMER_SETTINGS)},
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check every option of a `write`/`writeStream` and return them parsed; raise OptionError otherwise."""
    given = _canonical(options, {**dict.fromkeys(WRITE_OPTIONS), **PRODUCER_SETTINGS})
    topic = given.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' must not be empty")
    prefix = given.get("transactionalIdPrefix", DEFAULT_TRANSACTIONAL_ID_PREFIX).strip()
    if not prefix or len(prefix) > 100:
        raise OptionError(f"option 'transactionalIdPrefix' must be 1 to 100 characters, got {prefix!r}")
    fail = given.get("exactlyOnce.failOnceAfterWrite")
    return WriteOptions(bootstrap_servers=_bootstrap(given), topic=topic.strip() if topic else None,
                        producer_config=_client_config(given, PRODUCER_SETTINGS),
                        exactly_once=_boolean("exactlyOnce", given["exactlyOnce"]) if "exactlyOnce" in given else None,
                        transactional_id_prefix=prefix,
                        fail_once_after_write=None if fail is None else _int_at_least(0)(
                            "exactlyOnce.failOnceAfterWrite", fail))
