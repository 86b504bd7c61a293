"""The benchmark's client-only ceiling and load split: the null broker's answers are real Kafka answers
(batches byte-identical to the codec's, offsets where they were asked), the fleet reads every offset once,
and its producers spread records over the partitions evenly however full librdkafka's queue is."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pytest

from bench.fleet import consume_slices, owners
from bench.null_broker import At, NullBroker, batch_records, partitions_of, size_of
from pybroker.protocol.frame_codec import decode_response, encode_response
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.batch import crc_ok, iter_batches
from pybroker.protocol.records.record import Record, build_batch, decode_records

TOPIC = "bench-s100-p2-abc"


def test_topic_names_carry_size_and_partitions() -> None:
    assert (size_of(TOPIC), partitions_of(TOPIC)) == (100, 2)
    assert (size_of("other"), partitions_of("other")) == (100, 1)


@pytest.mark.parametrize("size", [0, 100, 1024, 10240])
@pytest.mark.parametrize("count", [1, 7, 300])
def test_batches_are_the_codecs_own(size: int, count: int) -> None:
    count = min(count, batch_records(size))  # the longest batch made: what a 1 MB producer batch holds
    made = NullBroker("127.0.0.1", 1).batch(size, count)
    assert bytes(made) == build_batch((Record(i, 0, None, bytes(size)) for i in range(count)), base_timestamp=1)


def _produce(broker: NullBroker, partition: int, counts: list[int]) -> None:
    records = b"".join(build_batch([Record(i, 0, None, b"x" * 100) for i in range(n)]) for n in counts)
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        TopicProduceData(name=TOPIC, partition_data=[PartitionProduceData(index=partition, records=records)])])
    broker.answer(0, 9, request)


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_returns_what_was_produced_from_the_batch_holding_the_offset_asked(version: int) -> None:
    """As a broker does: from the start of the batch that holds the offset (batches of the last shape
    produced, from offset 0), so a consumer starting mid-log gets and skips what comes before it."""
    broker = NullBroker("127.0.0.1", 1)
    _produce(broker, 0, [50, 50, 30])  # 130 records in batches of 30 (the last shape)
    _produce(broker, 1, [3])
    request = FetchRequest(max_wait_ms=100, topics=[FetchTopic(topic=TOPIC, partitions=[
        FetchPartition(partition=0, fetch_offset=47, partition_max_bytes=1 << 20),
        FetchPartition(partition=1, fetch_offset=3, partition_max_bytes=1 << 20)])])
    response, empty = broker.fetched(request)
    assert not empty
    chunks = encode_response(7, 1, version, response)
    raw = b"".join(bytes(p) for c in chunks for p in (c.parts() if isinstance(c, At) else (c,)))
    assert int.from_bytes(raw[:4], "big") == len(raw) - 4
    correlation_id, decoded = decode_response(raw[4:], 1, version)
    first, second = decoded.responses[0].partitions
    offsets = []
    for pos, header in iter_batches(first.records):
        assert crc_ok(first.records, pos, header)
        offsets += [header.base_offset + r.offset_delta for r in decode_records(first.records, pos, header)]
    assert (correlation_id, first.high_watermark, offsets) == (7, 130, list(range(30, 130)))
    assert (second.high_watermark, len(second.records)) == (3, 0)  # nothing past the end


def test_a_fetch_at_a_produced_batchs_base_starts_there() -> None:
    """The grid's consume starts where a fill's first batch starts; the null broker, like a broker, sends
    nothing ahead of it (counted from offset 0 in batches of the last shape, it sent 10 records more)."""
    broker = NullBroker("127.0.0.1", 1)
    _produce(broker, 0, [50, 50])
    _produce(broker, 0, [30])
    assert broker.boundary((TOPIC, 0), 100, 30) == 100
    assert broker.boundary((TOPIC, 0), 117, 30) == 100
    assert broker.boundary((TOPIC, 0), 99, 30) == 80  # inside the second batch: counted from its base
    assert broker.boundary((TOPIC, 1), 47, 30) == 30  # nothing produced there: from offset 0
    request = FetchRequest(max_wait_ms=100, topics=[FetchTopic(topic=TOPIC, partitions=[
        FetchPartition(partition=0, fetch_offset=100, partition_max_bytes=1 << 20)])])
    records = broker.fetched(request)[0].responses[0].partitions[0].records
    raw = b"".join(bytes(part) for part in records.parts())
    assert [header.base_offset for _, header in iter_batches(raw)] == [100]


def test_an_empty_fetch_says_so() -> None:
    request = FetchRequest(topics=[FetchTopic(topic=TOPIC, partitions=[FetchPartition(partition=0)])])
    assert NullBroker("127.0.0.1", 1).fetched(request)[1]


@pytest.mark.parametrize("partitions", [1, 2, 3, 16])
def test_producers_cover_every_partition(partitions: int) -> None:
    shares = owners(partitions, 2)
    assert sorted({p for share in shares for p in share}) == list(range(partitions))


@pytest.mark.parametrize("ends", [{0: 1001}, {0: 1, 1: 0}, {p: p * 7 for p in range(16)}, {0: 0}])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_consumers_read_every_offset_once(ends: dict[int, int], n: int) -> None:
    slices = consume_slices(ends, n)
    assert len(slices) == n
    read = sorted((p, o) for share in slices for p, start, end in share for o in range(start, end))
    assert read == sorted((p, o) for p, end in ends.items() for o in range(end))


def test_a_fetch_answer_keeps_to_max_bytes() -> None:
    broker = NullBroker("127.0.0.1", 1)
    for p in range(2):
        _produce(broker, p, [100] * 10)
    request = FetchRequest(max_bytes=25_000, topics=[FetchTopic(topic=TOPIC, partitions=[
        FetchPartition(partition=p, partition_max_bytes=1 << 20) for p in range(2)])])
    first, second = broker.fetched(request)[0].responses[0].partitions
    assert 0 < len(first.records) <= 25_000 and len(second.records) == 0


class _SlowQueueProducer:
    """librdkafka as the produce job sees it, with a queue that takes `room` records, 100 more per poll."""

    taken: ClassVar[dict[int, int]] = {}

    def __init__(self, settings: dict[str, Any]) -> None:
        self.room = 300
        _SlowQueueProducer.taken = {}

    def list_topics(self, topic: str, timeout: float) -> None:
        pass

    def produce_batch(self, topic: str, messages: list[dict[str, Any]], partition: int) -> int:
        if not self.room:
            raise BufferError("queue full")
        n = min(len(messages), self.room)
        self.room -= n
        self.taken[partition] = self.taken.get(partition, 0) + n
        return n

    def poll(self, timeout: float) -> int:
        self.room += 100
        return 0

    def flush(self, timeout: float) -> int:
        return 0


def test_a_chunk_the_queue_takes_only_part_of_is_finished_on_its_partition_not_sent_again_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A full queue must not pile records onto one partition: every partition gets CHUNK per turn."""
    import confluent_kafka

    from bench import fleet

    monkeypatch.setattr(confluent_kafka, "Producer", _SlowQueueProducer)

    class _Now:
        def start(self) -> float:
            return time.monotonic()

    result = fleet.produce_job(_Now(), "unused:9092", "t", [0, 1, 2, 3], 8 * fleet.CHUNK, 1024, 60.0, 60.0)
    assert _SlowQueueProducer.taken == {p: 2 * fleet.CHUNK for p in range(4)}
    assert result.per_partition == _SlowQueueProducer.taken
    assert result.records == 8 * fleet.CHUNK


def test_a_fill_gives_each_partition_exactly_its_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fill before a consume phase writes each partition its own count, so every target's consume reads
    the same records over the same partitions."""
    import confluent_kafka

    from bench import fleet

    monkeypatch.setattr(confluent_kafka, "Producer", _SlowQueueProducer)

    class _Now:
        def start(self) -> float:
            return time.monotonic()

    owed = [0, 700, 3, 0, fleet.CHUNK]
    result = fleet.produce_job(_Now(), "unused:9092", "t", [0, 1, 2, 3, 4], sum(owed), 1024, 60.0, 60.0,
                               counts=owed)
    assert _SlowQueueProducer.taken == {1: 700, 2: 3, 4: fleet.CHUNK}
    assert result.per_partition == _SlowQueueProducer.taken and result.records == sum(owed)
