"""A long-polling fetch reads again only the partitions that moved, and stays correct when they do."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.context import RequestContext
from pybroker.broker.handlers import fetch as fetch_handler
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.batch import iter_batches, parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.log import Log
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.waiting import until

PARTITIONS = 4


def _records(n: int, value: bytes = b"v") -> bytes:
    return build_batch([Record(i, 0, b"k", value) for i in range(n)], base_timestamp=int(time.time() * 1000))


def _produce(topic: str, partition: int, records: bytes) -> ProduceRequest:
    return ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=records)])])


def _fetch(topic: str, offsets: list[int], min_bytes: int) -> FetchRequest:
    return FetchRequest(max_wait_ms=30_000, min_bytes=min_bytes, max_bytes=1 << 20, topics=[
        FetchTopic(topic=topic, topic_id=uuid.UUID(int=0), partitions=[
            FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20)
            for p, offset in enumerate(offsets)])])


async def test_a_wake_reads_only_the_partition_that_moved(client: RawClient, app: BrokerApp,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    create = CreateTopicsRequest(topics=[CreatableTopic(name="lp", num_partitions=PARTITIONS, replication_factor=1)])
    assert (await client.call(create, 7)).topics[0].error_code == 0
    for p in range(PARTITIONS):  # something already there below min_bytes: each partition has bytes to read
        await client.call(_produce("lp", p, _records(1)), 9)
    reads: Counter[int] = Counter()
    real_read = Log.read

    def counting_read(self: Log, *args: Any, **kwargs: Any) -> Any:
        reads[self.partition] += 1
        return real_read(self, *args, **kwargs)

    monkeypatch.setattr(Log, "read", counting_read)
    min_bytes = 4000
    await client.send(_fetch("lp", [0] * PARTITIONS, min_bytes), 12)
    # parked: watched under each of its partitions
    await until(lambda: len(app.state.purgatory) == PARTITIONS, "the fetch was never parked")
    assert reads == Counter(range(PARTITIONS))  # the first pass reads them all
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    producer = RawClient(reader, writer)
    try:
        await producer.call(_produce("lp", 2, _records(3, b"x" * 100)), 9)  # not enough yet
        await until(lambda: reads[2] == 2, "the append never woke the fetch")
        await asyncio.sleep(0.1)  # time for a wrong read of another partition to show
        assert reads == Counter({0: 1, 1: 1, 2: 2, 3: 1})  # the wake read only partition 2
        await producer.call(_produce("lp", 1, _records(40, b"y" * 100)), 9)  # now past min_bytes
        fetched = await client.receive(1, 12, timeout=5)
    finally:
        producer.close()
    assert reads == Counter({0: 1, 1: 2, 2: 2, 3: 1})
    counts = [sum(h.records_count for _, h in iter_batches(bytes(part.records)))
              for part in fetched.responses[0].partitions]
    assert counts == [1, 41, 4, 1]  # the remembered answers are whole and current
    assert [part.high_watermark for part in fetched.responses[0].partitions] == [1, 41, 4, 1]


async def test_read_committed_wakes_see_the_lso_move_and_the_aborted_list(client: RawClient, app: BrokerApp) -> None:
    """Data of an open transaction moves the high watermark but not the LSO: nothing visible yet; the
    abort marker moves the LSO: the records and the aborted transaction come with the answer."""
    app.state.logs.create_topic("rcw", 2, {})
    log = app.state.logs.get_log("rcw", 0)
    other = app.state.logs.get_log("rcw", 1)
    assert log is not None and other is not None
    now = int(time.time() * 1000)

    def append(target: Log, pid: int, n: int) -> None:
        data = bytearray(build_batch([Record(i, 0, b"k", b"w" * 50) for i in range(n)], base_timestamp=now,
                                     producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                     base_sequence=0 if pid >= 0 else -1, is_transactional=pid >= 0))
        target.append(data, [(0, parse_header(data))], now_ms=now)

    append(other, -1, 1)  # partition 1 has a little, below min_bytes
    request = _fetch("rcw", [0, 0], 200)
    request.isolation_level = 1
    await client.send(request, 12)
    await asyncio.sleep(0.1)
    append(log, 7, 5)  # open transaction: high watermark 5, LSO 0
    app.state.purgatory.notify(("rcw", 0))
    await asyncio.sleep(0.1)
    assert len(app.state.purgatory) > 0  # still waiting: nothing stable yet
    log.append_marker(7, 0, 0, False, now_ms=now)  # aborted: LSO 6
    app.state.purgatory.notify(("rcw", 0))
    fetched = await client.receive(1, 12, timeout=5)
    first, second = fetched.responses[0].partitions
    assert (first.high_watermark, first.last_stable_offset) == (6, 6)
    assert [(h.base_offset, h.last_offset) for _, h in iter_batches(bytes(first.records))] == [(0, 4), (5, 5)]
    assert [(a.producer_id, a.first_offset) for a in first.aborted_transactions] == [(7, 0)]
    assert [(h.base_offset, h.last_offset) for _, h in iter_batches(bytes(second.records))] == [(0, 0)]


async def test_a_pass_that_reaches_min_bytes_remembers_nothing_after_it(client: RawClient, app: BrokerApp) -> None:
    """Only a pass that ends below `min_bytes` waits, and then it has remembered every partition; a pass
    that reaches it answers at once, so it builds no memo entries past that point (a consumer's fetch over
    1,024 partitions would otherwise build one per partition, every fetch)."""
    create = CreateTopicsRequest(topics=[CreatableTopic(name="mb", num_partitions=PARTITIONS, replication_factor=1)])
    assert (await client.call(create, 7)).topics[0].error_code == 0
    for p in range(PARTITIONS):
        await client.call(_produce("mb", p, _records(1)), 9)
    ctx = RequestContext(app.state, 1, 12, 1, "test", "in-process")
    for min_bytes, remembered in ((1, []), (1 << 20, [(0, p) for p in range(PARTITIONS)])):
        memo: dict[tuple[int, int], Any] = {}
        _, size, errors = fetch_handler._read_all(ctx, _fetch("mb", [0] * PARTITIONS, min_bytes), memo)
        assert (size > 0, errors) == (True, False)
        assert sorted(memo) == remembered
