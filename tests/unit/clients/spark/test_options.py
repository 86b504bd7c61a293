"""Option parsing: Spark's Kafka option names and rules, and a clear refusal for everything else."""

from __future__ import annotations

import pytest

from pybroker.clients.spark.offsets import OptionError, TopicPartition
from pybroker.clients.spark.options import (
    UNSUPPORTED_OPTIONS,
    BoundKind,
    parse_read_options,
    parse_write_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "events"}


def lowered(options: dict[str, str]) -> dict[str, str]:
    """Spark hands a data source its options with lower-cased keys."""
    return {k.lower(): v for k, v in options.items()}


def test_defaults_are_sparks() -> None:
    batch = parse_read_options(BASE, streaming=False)
    stream = parse_read_options(BASE, streaming=True)
    assert batch.starting.kind is BoundKind.EARLIEST and batch.ending.kind is BoundKind.LATEST
    assert stream.starting.kind is BoundKind.LATEST
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.max_offsets_per_trigger is None and batch.min_partitions is None
    assert batch.bootstrap_servers == ("127.0.0.1:9092",)
    assert batch.subscription.topics == ("events",)


def test_keys_are_case_insensitive_as_spark_passes_them() -> None:
    opts = parse_read_options(lowered({**BASE, "startingOffsets": "latest", "maxOffsetsPerTrigger": "10",
                                       "includeHeaders": "TRUE", "kafka.client.id": "me"}), streaming=True)
    assert opts.starting.kind is BoundKind.LATEST
    assert opts.max_offsets_per_trigger == 10 and opts.include_headers
    assert opts.consumer_config == {"client_id": "me", "isolation_level": "read_committed"}


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "t"}, "'kafka.bootstrap.servers' is required"),
    ({**BASE, "kafka.bootstrap.servers": "nohost"}, "is not host:port"),
    ({"kafka.bootstrap.servers": "h:1"}, "exactly one of 'subscribe', 'subscribePattern' or 'assign'"),
    ({**BASE, "assign": '{"t": [0]}'}, r"exactly one of .*got subscribe, assign"),
    ({**BASE, "subscribe": " , "}, "at least one topic"),
    ({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("}, "not a valid regular expression"),
    ({"kafka.bootstrap.servers": "h:1", "assign": "[0]"}, "must be a JSON object"),
    ({"kafka.bootstrap.servers": "h:1", "assign": '{"t": ["x"]}'}, "list of partition numbers"),
    ({**BASE, "startingOffsets": "latest"}, "cannot be 'latest' for batch queries"),
    ({**BASE, "endingOffsets": "earliest"}, "cannot be 'earliest' for batch queries"),
    ({**BASE, "startingOffsets": '{"events": {"0": -1}}'}, r"-1 \(latest\) for events-0 is not allowed"),
    ({**BASE, "endingOffsets": '{"events": {"0": -2}}'}, r"-2 \(earliest\) for events-0 is not allowed"),
    ({**BASE, "startingOffsets": '{"events": {"0": -3}}'}, "must be an integer >= -2"),
    ({**BASE, "startingOffsets": '{"events": {"zero": 1}}'}, "is not a partition number"),
    ({**BASE, "startingOffsets": "{nope"}, "not valid JSON"),
    ({**BASE, "startingTimestamp": "-5"}, "must be >= 0"),
    ({**BASE, "failOnDataLoss": "maybe"}, "must be true or false"),
    ({**BASE, "minPartitions": "0"}, "must be >= 1"),
    ({**BASE, "maxOffsetsPerTrigger": "10"}, "only applies to streaming queries"),
    ({**BASE, "startingOffsetsByTimestampStrategy": "earliest"}, "must be one of error, latest"),
    ({**BASE, "kafka.isolation.level": "dirty"}, "must be one of read_uncommitted, read_committed"),
    ({**BASE, "kafka.security.protocol": "SSL"}, "must be one of plaintext"),
    ({**BASE, "kafka.sasl.mechanism": "PLAIN"}, "not supported by the pybroker connector: pybroker serves PLAINTEXT"),
    ({**BASE, "kafka.some.setting": "1"}, "Kafka client setting 'kafka.some.setting' is not supported"),
    ({**BASE, "startingoffset": "earliest"}, "unknown option 'startingoffset'.*known options: .*startingOffsets"),
    ({**BASE, "path": "/x"}, "unknown option 'path'"),
])
def test_bad_batch_options_are_refused_with_a_message(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_read_options(lowered(options), streaming=False)


@pytest.mark.parametrize(("option", "message"), [
    ("endingOffsets", "only applies to batch queries, not streaming queries"),
    ("endingTimestamp", "only applies to batch queries"),
])
def test_batch_only_options_are_refused_when_streaming(option: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_read_options({**BASE, option: "1"}, streaming=True)


@pytest.mark.parametrize("option", sorted(UNSUPPORTED_OPTIONS))
def test_every_unsupported_kafka_source_option_says_why(option: str) -> None:
    with pytest.raises(OptionError, match=f"'{option}' is not supported by the pybroker connector: .+"):
        parse_read_options(lowered({**BASE, option: "x"}), streaming=True)


def test_streaming_allows_latest_start_and_minus_one() -> None:
    opts = parse_read_options({**BASE, "startingOffsets": '{"events": {"0": -1, "1": -2, "2": 7}}'}, streaming=True)
    assert opts.starting.kind is BoundKind.OFFSETS
    assert dict(opts.starting.offsets) == {TopicPartition("events", 0): -1, TopicPartition("events", 1): -2,
                                           TopicPartition("events", 2): 7}


def test_timestamp_options_take_precedence_as_in_spark() -> None:
    both = {**BASE, "startingOffsets": "earliest", "startingOffsetsByTimestamp": '{"events": {"0": 5}}',
            "startingTimestamp": "1000"}
    assert parse_read_options(both, streaming=False).starting.kind is BoundKind.TIMESTAMP
    del both["startingTimestamp"]
    by_partition = parse_read_options(both, streaming=False).starting
    assert by_partition.kind is BoundKind.TIMESTAMPS and dict(by_partition.offsets) == {("events", 0): 5}
    ending = parse_read_options({**BASE, "endingTimestamp": "99"}, streaming=False).ending
    assert ending.kind is BoundKind.TIMESTAMP and ending.timestamp == 99


def test_subscribe_pattern_matches_whole_names_like_java() -> None:
    sub = parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": "ev.*s"},
                             streaming=True).subscription
    assert sub.matches("events") and sub.matches("evs")
    assert not sub.matches("events2") and not sub.matches("xevents")


def test_assign_is_sorted_and_deduplicated() -> None:
    sub = parse_read_options({"kafka.bootstrap.servers": "h:1", "assign": '{"b": [1, 0, 1], "a": [3]}'},
                             streaming=False).subscription
    assert sub.assigned == (("a", 3), ("b", 0), ("b", 1))


def test_write_options() -> None:
    opts = parse_write_options(lowered({"kafka.bootstrap.servers": "h:1,h2:2", "topic": " out ",
                                        "kafka.acks": "1", "kafka.compression.type": "zstd",
                                        "kafka.linger.ms": "0"}))
    assert opts.bootstrap_servers == ("h:1", "h2:2") and opts.topic == "out"
    assert opts.producer_config == {"acks": 1, "compression_type": "zstd", "linger_ms": 0}
    assert parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "-1"}).producer_config == {
        "acks": "all"}


@pytest.mark.parametrize(("options", "message"), [
    ({}, "'kafka.bootstrap.servers' is required"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}, "unknown option 'subscribe'"),
    ({"kafka.bootstrap.servers": "h:1", "topic": " "}, "'topic' must not be empty"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.acks": "2"}, "must be all, -1, 0 or 1"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.transactional.id": "x"}, "its own transactional id"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.fetch.max.bytes": "1"}, "not supported by the pybroker connector"),
])
def test_bad_write_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_write_options(options)
