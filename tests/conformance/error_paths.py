"""Error paths of the data and admin APIs: unknown topics and partitions, out-of-range offsets, invalid
names, configs and values, oversized and malformed records. Each scenario ends with the answer under test;
a known difference names what differs and why (strict xfail, listed in docs/conformance.md).
"""

from __future__ import annotations

import struct
import uuid

from pybroker.protocol.messages.alter_configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from pybroker.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterableConfig as IncrementalConfig,
)
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterConfigsResource as IncrementalResource,
)
from pybroker.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
)
from pybroker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from pybroker.protocol.records.batch import rewrite_crc
from pybroker.protocol.records.record import Record, build_batch
from tests.conformance import scenarios as s
from tests.conformance.registry import scenario
from tests.conformance.side import Side

FAMILY = "error_paths"
TOPIC = 2
SET, DELETE, APPEND = 0, 1, 2


async def topic_of(side: Side, partitions: int = 1, records: bool = False, configs: dict[str, str | None] | None = None,
                   suffix: str = "t") -> str:
    name = side.name(suffix)
    await side.raw(s.create(s.topic(name, partitions=partitions, configs=configs)), 7)
    await side.created(name, partitions)
    if records:
        await side.raw(s.produce(name), 9)
    return name


def _register_metadata() -> None:
    known = ("Metadata v1-v3 of an unknown topic (auto-creation implied): both create it, but Kafka 4.4 answers "
             "UNKNOWN_TOPIC_OR_PARTITION while its controller does (the topic is served a moment later, see "
             "errors/metadata-auto-creates/v1); pybroker creates it before answering, so its first answer "
             "already lists it")
    for version in (1, 2, 3, 4, 9, 12, 13):
        async def unknown(side: Side, version: int = version) -> None:
            await side.call(s.metadata(side.name("unknown")), version)
        scenario(f"errors/metadata-unknown-topic/v{version}", FAMILY, f"Metadata v{version} of an unknown topic",
                 known=known if version <= 3 else None)(unknown)
    for version in (1, 9, 12):
        async def existing(side: Side, version: int = version) -> None:
            await side.call(s.metadata(await topic_of(side, partitions=3)), version)
        scenario(f"errors/metadata-existing-topic/v{version}", FAMILY,
                 f"Metadata v{version} of a topic of three partitions")(existing)


@scenario("errors/metadata-auto-creates/v1", FAMILY, "Metadata v1 of an unknown topic, then (once the topic is "
          "served) Metadata v12 of it")
async def _metadata_auto_creates(side: Side) -> None:
    await side.raw(s.metadata(side.name("auto")), 1)
    await side.created(side.name("auto"))
    await side.call(s.metadata(side.name("auto")), 12)


CREATE_REFUSALS = {
    "name-with-a-space": lambda n: [s.topic("bad name " + n)],
    "empty-name": lambda n: [s.topic("")],
    "dot": lambda n: [s.topic(".")],
    "dot-dot": lambda n: [s.topic("..")],
    "name-too-long": lambda n: [s.topic(n + "x" * 250)],
    "zero-partitions": lambda n: [s.topic(n, partitions=0)],
    "negative-partitions": lambda n: [s.topic(n, partitions=-5)],
    "replication-factor-above-brokers": lambda n: [s.topic(n, replication=3)],
    "replication-factor-zero": lambda n: [s.topic(n, replication=0)],
    "unknown-config": lambda n: [s.topic(n, configs={"no.such.config": "1"})],
    "invalid-config-value": lambda n: [s.topic(n, configs={"cleanup.policy": "sometimes"})],
    "null-config-value": lambda n: [s.topic(n, configs={"retention.ms": None})],
    "negative-segment-bytes": lambda n: [s.topic(n, configs={"segment.bytes": "-1"})],
    "not-a-number": lambda n: [s.topic(n, configs={"retention.ms": "soon"})],
    "same-name-twice": lambda n: [s.topic(n), s.topic(n)],
}
CREATE_KNOWN: dict[str, str] = {}
# pybroker says why it refused a batch; Kafka's answer has no message for these refusals (only for the
# records its LogValidator names). Clients show the message in the exception they raise.
SAYS_WHY = ("Produce of a batch refused as a whole (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD of a malformed "
            "batch): pybroker's answer says "
            "why in error_message; Kafka's carries none")


def _register_create_topics() -> None:
    for case, topics in CREATE_REFUSALS.items():
        async def refused(side: Side, topics=topics) -> None:  # type: ignore[no-untyped-def]
            await side.call(s.create(*topics(side.name()), validate_only=True), 7)
        scenario(f"errors/create-topics/{case}", FAMILY, f"CreateTopics v7 refusal: {case.replace('-', ' ')}",
                 known=CREATE_KNOWN.get(case))(refused)


@scenario("errors/create-topics/existing-topic", FAMILY, "CreateTopics of a topic that exists")
async def _create_existing(side: Side) -> None:
    await side.call(s.create(s.topic(await topic_of(side))), 7)


@scenario("errors/produce/unknown-topic", FAMILY, "Produce to an unknown topic",
          known="Produce to an unknown topic: pybroker auto-creates it and appends; Kafka's Produce never "
                "creates topics and answers UNKNOWN_TOPIC_OR_PARTITION")
async def _produce_unknown_topic(side: Side) -> None:
    await side.call(s.produce(side.name("nowhere")), 9)


@scenario("errors/produce/unknown-partition", FAMILY, "Produce to partition 4 of a one-partition topic")
async def _produce_unknown_partition(side: Side) -> None:
    await side.call(s.produce(await topic_of(side), partition=4), 9)


@scenario("errors/produce/invalid-acks", FAMILY, "Produce with acks=2")
async def _produce_invalid_acks(side: Side) -> None:
    await side.call(s.produce(await topic_of(side), acks=2), 9)


@scenario("errors/produce/record-too-large", FAMILY, "Produce of a batch over the topic's max.message.bytes",
          known=SAYS_WHY)
async def _produce_too_large(side: Side) -> None:
    name = await topic_of(side, configs={"max.message.bytes": "1000"})
    big = build_batch([Record(0, 0, b"k", b"v" * 2000)], base_timestamp=s.TIMESTAMP)
    await side.call(s.produce(name, data=big), 9)


@scenario("errors/produce/corrupt-crc", FAMILY, "Produce of a batch whose CRC does not match", known=SAYS_WHY)
async def _produce_corrupt_crc(side: Side) -> None:
    batch = bytearray(s.records())
    batch[-1] ^= 0xFF
    await side.call(s.produce(await topic_of(side), data=bytes(batch)), 9)


@scenario("errors/produce/truncated-batch", FAMILY, "Produce of a batch cut short", known=SAYS_WHY)
async def _produce_truncated(side: Side) -> None:
    await side.call(s.produce(await topic_of(side), data=s.records()[:40]), 9)


@scenario("errors/produce/wrong-record-count", FAMILY, "Produce of a batch whose header counts more records",
          known=SAYS_WHY)
async def _produce_wrong_count(side: Side) -> None:
    batch = bytearray(s.records())
    struct.pack_into(">i", batch, 57, 5)  # the records count; the CRC-32C is made right again
    rewrite_crc(batch, 0)
    await side.call(s.produce(await topic_of(side), data=bytes(batch)), 9)


@scenario("errors/produce/keyless-record-to-compacted-topic", FAMILY, "Produce of a record without a key to a "
          "compacted topic")
async def _produce_keyless_compacted(side: Side) -> None:
    name = await topic_of(side, configs={"cleanup.policy": "compact"})
    keyless = build_batch([Record(0, 0, None, b"v")], base_timestamp=s.TIMESTAMP)
    await side.call(s.produce(name, data=keyless), 9)


@scenario("errors/list-offsets/unknown-partition-and-topic", FAMILY,
          "ListOffsets of partition 7 of a one-partition topic, and of an unknown topic")
async def _list_offsets_unknown(side: Side) -> None:
    await side.call(s.list_offsets(await topic_of(side), -1, partition=7), 7)
    await side.call(s.list_offsets(side.name("unknown"), -1), 7)


def _register_list_offsets() -> None:
    for label, timestamp, known in (("earliest", -2, None), ("latest", -1, None), ("max-timestamp", -3, None),
                                    ("first-timestamp", s.TIMESTAMP, None),
                                    ("after-the-last", s.TIMESTAMP + 10_000, None)):
        async def by_timestamp(side: Side, timestamp: int = timestamp) -> None:
            await side.call(s.list_offsets(await topic_of(side, records=True), timestamp), 7)
        scenario(f"errors/list-offsets/{label}", FAMILY, f"ListOffsets v7 by timestamp {timestamp}",
                 known=known)(by_timestamp)


def _register_fetch() -> None:
    for offset in (5, 100, -7):
        async def out_of_range(side: Side, offset: int = offset) -> None:
            await side.call(s.fetch(await topic_of(side, records=True), offset), 12)
        scenario(f"errors/fetch/out-of-range-{offset}", FAMILY,
                 f"Fetch v12 at offset {offset} of a log of three")(out_of_range)


@scenario("errors/fetch/unknown-topic-id", FAMILY, "Fetch v13 of an unknown topic id")
async def _fetch_unknown_topic_id(side: Side) -> None:
    await side.call(s.fetch("", 0, topic_id=uuid.UUID(int=0x1234)), 13)


@scenario("errors/fetch/unknown-partition", FAMILY, "Fetch v12 of partition 3 of a one-partition topic")
async def _fetch_unknown_partition(side: Side) -> None:
    await side.call(s.fetch(await topic_of(side), 0, partition=3), 12)


@scenario("errors/delete-topics/unknown", FAMILY, "DeleteTopics of an unknown topic, by name and by id")
async def _delete_unknown(side: Side) -> None:
    await side.call(DeleteTopicsRequest(topic_names=[side.name("gone")], timeout_ms=5000), 5)
    await side.call(DeleteTopicsRequest(topics=[DeleteTopicState(name=None, topic_id=uuid.UUID(int=0x77))],
                                        timeout_ms=5000), 6)


@scenario("errors/delete-records/beyond-high-watermark", FAMILY, "DeleteRecords past the high watermark, "
          "and of an unknown partition")
async def _delete_records_beyond(side: Side) -> None:
    name = await topic_of(side, records=True)
    await side.call(DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=name, partitions=[
        DeleteRecordsPartition(partition_index=0, offset=10), DeleteRecordsPartition(partition_index=5, offset=1)])],
        timeout_ms=5000), 2)


@scenario("errors/offset-for-leader-epoch/unknown", FAMILY, "OffsetForLeaderEpoch of an unknown partition and "
          "of a future epoch")
async def _ofle_unknown(side: Side) -> None:
    name = await topic_of(side, records=True)
    await side.call(OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderTopic(topic=name, partitions=[OffsetForLeaderPartition(partition=3, leader_epoch=0),
                                                     OffsetForLeaderPartition(partition=0, leader_epoch=9)]),
        OffsetForLeaderTopic(topic=side.name("none"), partitions=[OffsetForLeaderPartition(partition=0)])]), 4)


@scenario("errors/create-partitions/refusals", FAMILY, "CreatePartitions to fewer, the same count, and of an "
          "unknown topic")
async def _create_partitions_refused(side: Side) -> None:
    name = await topic_of(side, partitions=2)
    for count, target in ((1, name), (2, name), (3, side.name("none"))):
        await side.call(CreatePartitionsRequest(topics=[CreatePartitionsTopic(name=target, count=count)],
                                                timeout_ms=5000, validate_only=True), 3)


@scenario("errors/describe-configs/unknown-topic", FAMILY, "DescribeConfigs of an unknown topic")
async def _describe_configs_unknown(side: Side) -> None:
    await side.call(DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC, resource_name=side.name("none"), configuration_keys=None)]), 4)


ALTER_REFUSALS = {
    "unknown-topic": ("none", "retention.ms", "1000"),
    "unknown-key": ("t", "no.such.config", "1"),
    "invalid-value": ("t", "cleanup.policy", "sometimes"),
    "not-a-number": ("t", "retention.ms", "soon"),
}


def _register_alter_configs() -> None:
    for case, (suffix, key, value) in ALTER_REFUSALS.items():
        async def alter(side: Side, suffix: str = suffix, key: str = key, value: str = value) -> None:
            await topic_of(side)
            await side.call(AlterConfigsRequest(resources=[AlterConfigsResource(
                resource_type=TOPIC, resource_name=side.name(suffix), configs=[AlterableConfig(key, value)])],
                validate_only=True), 2)
            await side.call(IncrementalAlterConfigsRequest(resources=[IncrementalResource(
                resource_type=TOPIC, resource_name=side.name(suffix), configs=[IncrementalConfig(key, SET, value)])],
                validate_only=True), 1)
        scenario(f"errors/alter-configs/{case}", FAMILY,
                 f"AlterConfigs v2 and IncrementalAlterConfigs v1: {case.replace('-', ' ')}")(alter)


@scenario("errors/incremental-alter-configs/append-to-a-scalar", FAMILY,
          "IncrementalAlterConfigs APPEND to a config that is not a list")
async def _append_scalar(side: Side) -> None:
    name = await topic_of(side)
    await side.call(IncrementalAlterConfigsRequest(resources=[IncrementalResource(
        resource_type=TOPIC, resource_name=name, configs=[IncrementalConfig("retention.ms", APPEND, "5")])],
        validate_only=True), 1)


_register_metadata()
_register_create_topics()
_register_list_offsets()
_register_fetch()
_register_alter_configs()
