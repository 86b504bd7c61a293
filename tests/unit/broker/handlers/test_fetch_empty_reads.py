"""A fetch reuses an earlier fetch's read that fitted nothing only while everything that read depended on is
unchanged, and its answers are then those of a fresh read (`broker/empty_reads.py`)."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.context import RequestContext
from pybroker.broker.empty_reads import EmptyReads
from pybroker.broker.handlers import fetch as fetch_handler
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.log import Log
from tests.unit.broker.conftest import RawClient

PARTITIONS = 3
#: one batch of this many 100-byte records is about 1,300 bytes
RECORDS = 12


def _records(n: int = RECORDS) -> bytes:
    return build_batch([Record(i, 0, b"k", b"v" * 100) for i in range(n)], base_timestamp=int(time.time() * 1000))


async def _produce(client: RawClient, partition: int, records: bytes) -> None:
    answer = await client.call(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name="er", partition_data=[PartitionProduceData(index=partition, records=records)])]), 9)
    assert answer.responses[0].partition_responses[0].error_code == 0


def _fetch(offsets: list[int], max_bytes: int, isolation: int = 0) -> FetchRequest:
    return FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=isolation, topics=[
        FetchTopic(topic="er", topic_id=uuid.UUID(int=0), partitions=[
            FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20)
            for p, offset in enumerate(offsets)])])


def _view(response: FetchResponse) -> list[tuple[Any, ...]]:
    """What a client reads of each partition's answer."""
    return [(part.partition_index, part.error_code, part.high_watermark, part.last_stable_offset,
             part.log_start_offset, part.aborted_transactions,
             bytes(part.records.read_bytes()) if hasattr(part.records, "read_bytes") else bytes(part.records or b""))
            for topic in response.responses for part in topic.partitions]


@pytest.fixture
async def topic(client: RawClient, app: BrokerApp) -> RequestContext:
    create = CreateTopicsRequest(topics=[CreatableTopic(name="er", num_partitions=PARTITIONS, replication_factor=1)])
    assert (await client.call(create, 7)).topics[0].error_code == 0
    for p in range(PARTITIONS):
        await _produce(client, p, _records())
    return RequestContext(app.state, 1, 12, 1, "test", "in-process")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """How many times each partition's log was read."""
    counted: Counter[int] = Counter()
    real_read = Log.read

    def counting_read(self: Log, *args: Any, **kwargs: Any) -> Any:
        counted[self.partition] += 1
        return real_read(self, *args, **kwargs)

    monkeypatch.setattr(Log, "read", counting_read)
    return counted


def _fresh(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    """The answer of a broker that remembers no empty read."""
    kept, ctx.state.empty_reads = ctx.state.empty_reads, EmptyReads()
    try:
        return fetch_handler._read_all(ctx, request)[0]
    finally:
        ctx.state.empty_reads = kept


async def test_a_partition_that_fitted_nothing_is_not_read_again_while_nothing_moved(
        topic: RequestContext, reads: Counter[int]) -> None:
    request = _fetch([0] * PARTITIONS, max_bytes=1500)  # the first batch whole, then too few bytes for another
    first = fetch_handler._read_all(topic, request)[0]
    assert reads == Counter(range(PARTITIONS))
    assert [len(row[-1]) > 0 for row in _view(first)] == [True, False, False]
    second = fetch_handler._read_all(topic, request)[0]
    assert reads == Counter({0: 2, 1: 1, 2: 1})  # the first partition with data is always read (KIP-74)
    assert _view(second) == _view(first) == _view(_fresh(topic, request))


async def test_each_input_that_moved_makes_it_read_again(topic: RequestContext, reads: Counter[int],
                                                         client: RawClient) -> None:
    state = topic.state
    fetch_handler._read_all(topic, _fetch([0] * PARTITIONS, max_bytes=1500))
    reads.clear()
    steps: list[tuple[str, FetchRequest, Any]] = [
        ("the high watermark", _fetch([0] * PARTITIONS, 1500), lambda: _produce(client, 1, _records(1))),
        ("a roll (a new segment list)", _fetch([0] * PARTITIONS, 1500),
         lambda: _async(state.logs.get_log("er", 2).roll)),
        ("the offset asked", _fetch([0, 0, 12], 1500), None),
        ("the isolation", _fetch([0, 0, 12], 1500, isolation=1), None),
        ("a larger limit", _fetch([0, 0, 12], 3000, isolation=1), None),
    ]
    for what, request, change in steps:
        if change is not None:
            await change()
        before = Counter(reads)
        answer = fetch_handler._read_all(topic, request)[0]
        moved = reads - before
        assert moved[1] + moved[2] >= 1, f"{what}: nothing read again"
        assert _view(answer) == _view(_fresh(topic, request)), what
        reads.clear()
        fetch_handler._read_all(topic, request)  # nothing moved: only partitions that had records are read
        assert reads == Counter(row[0] for row in _view(answer) if row[0] == 0 or row[-1]), what


async def _async(call: Any) -> None:
    call()


async def test_answers_match_fresh_reads_over_random_appends_rolls_and_limits(
        topic: RequestContext, client: RawClient) -> None:
    """Seeded walk: every answer equals what a broker that remembers nothing answers."""
    rng = random.Random(34)
    offsets = [0] * PARTITIONS
    for _ in range(60):
        step = rng.random()
        p = rng.randrange(PARTITIONS)
        log = topic.state.logs.get_log("er", p)
        if step < 0.2:
            await _produce(client, p, _records(rng.randint(1, 30)))
        elif step < 0.3:
            log.roll()
        elif step < 0.5:
            offsets[p] = rng.randrange(log.log_end_offset + 1)
        request = _fetch(offsets, rng.choice([200, 1500, 3000, 6000, 1 << 20]), rng.choice([0, 1]))
        answer = fetch_handler._read_all(topic, request)[0]
        assert _view(answer) == _view(_fresh(topic, request))


async def test_an_offline_dir_is_answered_with_its_error_not_a_remembered_read(tmp_path: Path) -> None:
    """A remembered empty read is answered before the partition is looked up, but only while its log's dir
    is online: once one dir goes offline, its partitions answer KAFKA_STORAGE_ERROR, as a fresh read does,
    and the partitions of the other dir still answer what they hold."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    app = BrokerApp(BrokerConfig.load({"log.dirs": ",".join(map(str, dirs)), "listeners": "PLAINTEXT://127.0.0.1:0"}))
    await app.start()
    try:
        client = RawClient(*await asyncio.open_connection("127.0.0.1", app.bound_ports[0]))
        try:
            create = CreateTopicsRequest(topics=[CreatableTopic(name="er", num_partitions=4, replication_factor=1)])
            assert (await client.call(create, 7)).topics[0].error_code == 0
            for p in range(4):
                await _produce(client, p, _records())
        finally:
            client.close()
        ctx = RequestContext(app.state, 1, 12, 1, "test", "in-process")
        where = [app.state.logs.get_log("er", p).dir.parent for p in range(4)]
        assert where[0] != where[1] or where[0] != where[2] or where[0] != where[3]
        request = _fetch([0] * 4, max_bytes=1500)
        fetch_handler._read_all(ctx, request)
        assert len(app.state.empty_reads) == 3
        offline = next(d for d in where if d != where[0])
        app.state.logs.failures.report(offline, OSError("the disk went away"))
        answer = fetch_handler._read_all(ctx, request)[0]
        codes = [row[1] for row in _view(answer)]
        assert codes == [ErrorCode.KAFKA_STORAGE_ERROR if d == offline else ErrorCode.NONE for d in where]
        assert codes[0] == ErrorCode.NONE and len(_view(answer)[0][-1]) > 0
    finally:
        await app.stop()


async def test_a_long_polls_pass_below_min_bytes_remembers_every_partition(topic: RequestContext) -> None:
    """A pass that ends below `min_bytes` waits, and its wakes compare each partition with what the pass
    remembered of it, so it remembers every partition, those an earlier fetch found empty too."""
    request = _fetch([0] * PARTITIONS, max_bytes=1500)
    fetch_handler._read_all(topic, request)  # remembers partitions 1 and 2 as empty
    request.min_bytes = 1 << 20
    request.max_wait_ms = 500
    memo: dict[tuple[int, int], Any] = {}
    answer, size, _ = fetch_handler._read_all(topic, request, memo)
    assert 0 < size < request.min_bytes
    assert sorted(memo) == [(0, p) for p in range(PARTITIONS)]
    assert _view(answer) == _view(_fresh(topic, request))


class _Log:
    """What the table asks of a log: its key, its segment list and its positions."""

    topic = "t"
    partition = 0

    def __init__(self) -> None:
        self.segments: list[Any] = []
        self.at = (5, 5, 0)

    def positions(self) -> tuple[int, int, int]:
        return self.at


def test_an_entry_answers_only_what_it_was_read_at() -> None:
    table = EmptyReads()
    log = _Log()
    table.remember((log, 5, 5, 0), 5, 20, False, "answer")
    held = table.get(("t", 0))
    assert held is not None and held.answers(5, 20, False)
    assert held.answers(5, 19, False)  # a smaller limit fits nothing either
    assert not held.answers(5, 21, False)  # a larger limit may fit a batch
    assert not held.answers(4, 20, False)  # another offset
    assert not held.answers(5, 20, True)  # another isolation
    log.at = (6, 6, 0)  # the high watermark moved
    assert not held.answers(5, 20, False)
    log.at = (5, 5, 0)
    log.segments = []  # a new list: a roll, a clean or a deletion
    assert not held.answers(5, 10, False)


async def test_a_deleted_topic_leaves_no_log_in_the_table(topic: RequestContext, client: RawClient) -> None:
    """The table follows the broker's table of logs: once a partition is created or deleted, every entry
    goes, so a deleted partition's log (its segments, indexes and producer state) is not kept alive here."""
    from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState

    state = topic.state
    fetch_handler._read_all(topic, _fetch([0] * PARTITIONS, max_bytes=1500))
    assert len(state.empty_reads) == PARTITIONS - 1
    deleted = DeleteTopicsRequest(topics=[DeleteTopicState(name="er")], timeout_ms=5000)
    assert (await client.call(deleted, 6)).responses[0].error_code == 0
    create = CreateTopicsRequest(topics=[CreatableTopic(name="other", num_partitions=1, replication_factor=1)])
    assert (await client.call(create, 7)).topics[0].error_code == 0
    fetch_handler._read_all(topic, FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1500, topics=[
        FetchTopic(topic="other", partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    assert len(state.empty_reads) == 0
