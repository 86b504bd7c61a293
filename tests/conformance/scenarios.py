"""Builders of the requests the conformance scenarios send to both brokers (pure functions, any thread).

The records are built with a fixed timestamp, so a recorded Fetch answer holds the same bytes as a live one.
"""

from __future__ import annotations

import uuid

from pybroker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch

TIMESTAMP = 1_700_000_000_000


def records(n: int = 3) -> bytes:
    return build_batch([Record(i, 0, b"k", b"v%d" % i) for i in range(n)], base_timestamp=TIMESTAMP)


def create(*topics: CreatableTopic, validate_only: bool = False) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=list(topics), timeout_ms=10_000, validate_only=validate_only)


def topic(name: str, partitions: int = 1, replication: int = 1,
          configs: dict[str, str | None] | None = None) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication,
                          configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


def metadata(*names: str, auto_create: bool = False) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in names],
                           allow_auto_topic_creation=auto_create)


def produce(name: str, partition: int = 0, data: bytes | None = None, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(
        name=name, partition_data=[PartitionProduceData(index=partition, records=records() if data is None else data)])])


def list_offsets(name: str, timestamp: int, partition: int = 0) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=name, partitions=[
        ListOffsetsPartition(partition_index=partition, timestamp=timestamp, max_num_offsets=1)])])


def fetch(name: str, offset: int, partition: int = 0, topic_id: uuid.UUID | None = None) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[FetchTopic(
        topic=name, topic_id=topic_id or uuid.UUID(int=0), partitions=[
            FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])
