"""Requests the conformance tests send to both brokers, and the waits Kafka's asynchronous metadata needs.

A new topic is visible to Kafka's request handlers only once its metadata record reached the broker's
image, a moment after CreateTopics answered; `created` waits for it on both brokers, so the scenarios
after it start from the same state. Coroutines for the test's event loop.
"""

from __future__ import annotations

import asyncio
import uuid

from pybroker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient

TIMESTAMP = 1_700_000_000_000


def unique(prefix: str) -> str:
    """A topic name of this test's own: the Kafka node is shared by the whole session."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


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


async def created(client: RawClient, name: str, partitions: int = 1, timeout: float = 10) -> uuid.UUID:
    """Wait until `client`'s broker serves every partition of `name` with a leader; its topic id."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        answer = await client.call(metadata(name), 12)
        found = answer.topics[0]
        if found.error_code == 0 and len(found.partitions) == partitions and all(
                p.error_code == 0 and p.leader_id >= 0 for p in found.partitions):
            return found.topic_id
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{name} not served: {answer}")
        await asyncio.sleep(0.05)
