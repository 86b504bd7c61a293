"""Handlers through the real server, driven by our own codecs: the cases stock clients rarely exercise."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from pybroker.broker.app import BrokerApp
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.batch import iter_batches, parse_header
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.waiting import until


def _records(n: int = 3, ts: int | None = None) -> bytes:
    now = int(time.time() * 1000) if ts is None else ts
    return build_batch([Record(i, 0, b"k", b"v%d" % i) for i in range(n)], base_timestamp=now)


def _produce(topic: str, records: bytes | bytearray | None, partition: int = 0, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=records)])])


def _fetch(topic: str, offset: int = 0, *, topic_id: uuid.UUID | None = None, max_wait: int = 0,
           min_bytes: int = 0) -> FetchRequest:
    return FetchRequest(max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=1 << 20, topics=[
        FetchTopic(topic=topic, topic_id=topic_id or uuid.UUID(int=0),
                   partitions=[FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def _partition(response: object) -> object:
    return response.responses[0].partition_responses[0]  # type: ignore[attr-defined]


async def test_produce_every_record_batch_version_and_refuse_message_sets(client: RawClient) -> None:
    expected = 0
    for version in range(3, 12):
        answer = _partition(await client.call(_produce("p", _records(2)), version))
        assert (answer.error_code, answer.base_offset) == (0, expected)
        expected += 2
    for version in range(0, 3):
        answer = _partition(await client.call(_produce("p", _records(2)), version))
        assert answer.error_code == ErrorCode.UNSUPPORTED_VERSION


async def test_bad_records_are_refused_and_nothing_reaches_the_log(client: RawClient, app: BrokerApp) -> None:
    good = bytearray(_records(2))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    cases = [(bytes(corrupt), ErrorCode.CORRUPT_MESSAGE), (bytes(good[:30]), ErrorCode.INVALID_RECORD),
             (bytes(good) * 2, ErrorCode.INVALID_RECORD), (None, ErrorCode.INVALID_RECORD)]
    for records, code in cases:
        answer = _partition(await client.call(_produce("bad", records), 9))
        assert answer.error_code == code
    log = app.state.logs.get_log("bad", 0)
    assert log is not None and log.log_end_offset == 0 and log.size_bytes == 0
    answer = _partition(await client.call(_produce("bad", _records(1), acks=7), 9))
    assert answer.error_code == ErrorCode.INVALID_REQUIRED_ACKS


async def test_fetch_by_topic_id_and_unknown_id(client: RawClient) -> None:
    await client.call(_produce("ids", _records(3)), 9)
    metadata = await client.call(MetadataRequest(topics=[MetadataRequestTopic(name="ids")]), 12)
    topic_id = metadata.topics[0].topic_id
    assert topic_id != uuid.UUID(int=0)
    fetched = await client.call(_fetch("", topic_id=topic_id), 13)
    part = fetched.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark) == (0, 3)
    assert [h.records_count for _, h in iter_batches(bytes(part.records))] == [3]
    unknown = await client.call(_fetch("", topic_id=uuid.uuid4()), 13)
    assert unknown.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_metadata_by_topic_id_ignores_an_empty_name(client: RawClient) -> None:
    """Java's KIP-848 consumer resolves its assignment's topic ids with `name=""` beside each id: Kafka
    looks the topic up by its id (it failed here as an invalid topic name "")."""
    await client.call(_produce("named-by-id", _records(1)), 9)
    metadata = await client.call(MetadataRequest(topics=[MetadataRequestTopic(name="named-by-id")]), 12)
    topic_id = metadata.topics[0].topic_id
    stray = uuid.uuid4()
    answer = await client.call(MetadataRequest(topics=[MetadataRequestTopic(name="", topic_id=topic_id),
                                                       MetadataRequestTopic(name="", topic_id=stray)]), 12)
    found, unknown = answer.topics
    assert (found.error_code, found.name, found.topic_id, len(found.partitions)) == (0, "named-by-id", topic_id, 1)
    assert (unknown.error_code, unknown.topic_id) == (ErrorCode.UNKNOWN_TOPIC_ID, stray)


async def test_fetch_long_poll_wakes_on_append_and_uses_sendfile(client: RawClient, app: BrokerApp) -> None:
    await client.call(_produce("poll", _records(1)), 9)
    await client.send(_fetch("poll", offset=1, max_wait=30_000, min_bytes=1), 12)
    await until(lambda: len(app.state.purgatory) == 1, "the fetch was never parked")
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    producer = RawClient(reader, writer)
    await producer.call(_produce("poll", _records(2)), 9)
    producer.close()
    fetched = await client.receive(1, 12, timeout=5)  # well before max_wait: woken by the append
    part = fetched.responses[0].partitions[0]
    assert [h.base_offset for _, h in iter_batches(bytes(part.records))] == [1]
    assert len(app.state.purgatory) == 0
    assert sum(c.writer.sendfile_bytes for c in app.state.connections if c.writer) > 0


async def test_fetch_out_of_range_and_empty_wait_expiry(client: RawClient) -> None:
    await client.call(_produce("oor", _records(2)), 9)
    answer = await client.call(_fetch("oor", offset=50), 12)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    answer = await client.call(_fetch("oor", offset=2, max_wait=50, min_bytes=1), 12)
    part = answer.responses[0].partitions[0]
    assert (part.error_code, len(part.records)) == (0, 0)


async def test_log_append_time_topic_stamps_batches(client: RawClient) -> None:
    create = CreateTopicsRequest(topics=[CreatableTopic(
        name="lat", num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(name="message.timestamp.type", value="LogAppendTime")])])
    assert (await client.call(create, 7)).topics[0].error_code == 0
    before = int(time.time() * 1000)
    answer = _partition(await client.call(_produce("lat", _records(2, ts=5)), 9))
    assert answer.log_append_time_ms >= before
    fetched = await client.call(_fetch("lat"), 12)
    header = parse_header(bytes(fetched.responses[0].partitions[0].records))
    assert header.timestamp_type == 1 and header.max_timestamp == answer.log_append_time_ms


async def test_list_offsets_special_timestamps_and_v0(client: RawClient) -> None:
    await client.call(_produce("lo", _records(3, ts=1000)), 9)
    await client.call(_produce("lo", _records(3, ts=9000)), 9)

    def request(timestamp: int) -> ListOffsetsRequest:
        return ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
            name="lo", partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp, max_num_offsets=1)])])

    async def offset(timestamp: int, version: int = 7) -> tuple[int, int]:
        part = (await client.call(request(timestamp), version)).topics[0].partitions[0]
        return part.offset, part.timestamp

    assert await offset(-2) == (0, -1)
    assert await offset(-1) == (6, -1)
    assert await offset(-3) == (3, 9000)
    assert await offset(5000) == (3, 9000)
    v0 = (await client.call(request(-1), 0)).topics[0].partitions[0]
    assert v0.old_style_offsets == [6]


async def test_metadata_creates_topics_when_allowed(client: RawClient) -> None:
    wanted = MetadataRequest(topics=[MetadataRequestTopic(name="auto")], allow_auto_topic_creation=False)
    answer = await client.call(wanted, 9)
    assert answer.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    wanted.allow_auto_topic_creation = True
    answer = await client.call(wanted, 9)
    assert answer.topics[0].error_code == 0 and len(answer.topics[0].partitions) == 1
    bad = await client.call(MetadataRequest(topics=[MetadataRequestTopic(name="bad name!")]), 9)
    assert bad.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_append_between_fetch_and_its_first_wait_still_wakes_it(app: BrokerApp) -> None:
    """The long-poll is watched before the handler returns; an append before anyone awaits it
    must not be missed (it was: fetches then slept for all of max_wait_ms)."""
    from pybroker.broker.context import RequestContext
    from pybroker.broker.dispatch import Waiting
    from pybroker.broker.handlers.fetch import handle_fetch
    from pybroker.broker.handlers.produce import handle_produce

    def ctx(api_key: int, version: int) -> RequestContext:
        return RequestContext(app.state, api_key, version, 1, "test", "in-process")

    first = handle_produce(ctx(0, 9), _produce("gap", bytearray(_records(1)), acks=1))
    assert asyncio.iscoroutine(first)  # the topic is auto-created first, off the loop
    first = await first
    assert _partition(first).error_code == 0
    answer = handle_fetch(ctx(1, 12), _fetch("gap", offset=1, max_wait=30_000, min_bytes=1))
    assert isinstance(answer, Waiting)  # a long-poll is a pure wait: the connection may go on meanwhile
    pending = answer.awaitable
    assert asyncio.isfuture(pending)  # the delayed fetch's future: the connection waits on it without a task
    handle_produce(ctx(0, 9), _produce("gap", bytearray(_records(2)), acks=1))  # before the coroutine ever runs
    fetched = await asyncio.wait_for(pending, 5)
    assert [h.base_offset for _, h in iter_batches(fetched.responses[0].partitions[0].records.read_bytes())] == [1]


async def test_shutdown_answers_in_flight_long_polls_first(tmp_path: Path) -> None:
    from pybroker.config.broker_config import BrokerConfig

    config = BrokerConfig.load({"log.dirs": str(tmp_path / "d"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    broker = BrokerApp(config)
    await broker.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.bound_ports[0])
    client = RawClient(reader, writer)
    await client.call(_produce("bye", _records(1)), 9)
    await client.send(_fetch("bye", offset=1, max_wait=30_000, min_bytes=1), 12)
    await asyncio.sleep(0.05)
    stopping = asyncio.ensure_future(broker.stop())
    answer = await client.receive(1, 12, timeout=5)
    assert answer.responses[0].partitions[0].error_code == 0
    await asyncio.wait_for(stopping, 10)
    client.close()


async def test_find_coordinator_names_this_broker_for_groups_in_every_version(client: RawClient) -> None:
    from pybroker.protocol.messages.find_coordinator import FindCoordinatorRequest

    for version in range(0, 4):
        answer = await client.call(FindCoordinatorRequest(key="g", key_type=0), version)
        assert (answer.error_code, answer.node_id) == (ErrorCode.NONE, 1)
        assert answer.port > 0
    for version in range(4, 7):
        answer = await client.call(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), version)
        assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [
            ("a", ErrorCode.NONE, 1), ("b", ErrorCode.NONE, 1)]
    # transactions are coordinated here too (the transaction state topic is made on first use)
    answer = await client.call(FindCoordinatorRequest(key="tx", key_type=1), 3)
    assert (answer.error_code, answer.node_id) == (ErrorCode.NONE, 1)


async def test_acks_0_produce_to_a_new_topic_creates_it_off_the_loop_and_stores_the_records(
        client: RawClient, app: BrokerApp) -> None:
    await client.send(_produce("quiet", _records(2), acks=0), 9)
    for _ in range(200):
        log = app.state.logs.get_log("quiet", 0)
        if log is not None and log.log_end_offset == 2:
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the acks=0 records never arrived")
    answer = _partition(await client.call(_produce("quiet", _records(1), acks=1), 9))  # the connection still serves
    assert (answer.error_code, answer.base_offset) == (0, 2)


async def test_auto_creation_obeys_the_per_request_cap(client: RawClient, app: BrokerApp) -> None:
    app.state.config.explicit["max.partitions.per.request"] = 2  # as if set in server.properties
    answer = await client.call(MetadataRequest(topics=[MetadataRequestTopic(name=f"cap{i}") for i in range(4)],
                                               allow_auto_topic_creation=True), 9)
    assert [t.error_code for t in answer.topics] == [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
