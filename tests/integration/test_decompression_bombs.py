"""Decompression bombs of every codec, to a compacted and a normal topic, against a real `pybroker start`.

Issue 28: a compressed batch is walked in a validation thread up to a budget of inflated bytes, and past
it judged first by its first records (as Kafka reads them, one after the other), then whole in a niced
worker process (`broker/partitions/validation_processes.py`), so that no bomb holds the broker's
interpreter lock. Each test proves the answer is Kafka's, nothing of the bomb is stored, another client
(the canary) was answered all along, the broker still runs, and a normal compressed batch still
validates. How fast the bystander is served under bombs is a figure for `bench/bombs.py`, not a test.

Kafka 4.4's answers (measured with these bombs against a KRaft node): INVALID_RECORD for each codec's
bomb of zeros on either policy (its first record has length 0). A bomb whose first record claims 1 GiB
has no verdict until the cap: CORRUPT_MESSAGE naming it (Kafka has no cap; it would try to inflate it).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import TopicPartition

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    TopicProduceData,
)
from pybroker.protocol.records.batch import HEADER_SIZE
from pybroker.protocol.records.codecs import compress
from pybroker.protocol.records.record import MAX_DECOMPRESSED, Record, build_batch
from tests.integration.bombs import PAST_THE_CAP, PAYLOADS, bomb, flagged_batch
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_consumer
from tests.integration.hostile import Canary, RawClient

CODECS = sorted(PAYLOADS)
POLICIES = ["compact", "delete"]
#: room for a 1 MB bomb, so max.message.bytes never answers first
MAX_MESSAGE_BYTES = str(4 << 20)
#: a record length of 1 GiB (zigzag varint): a first record that gives no verdict before the cap
GIB_RECORD = b"\x80\x80\x80\x80\x08"


@pytest.fixture
def pybroker_only(broker_target: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own validation path")


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(broker.host, broker.port, timeout=120) as raw:
        yield raw


def create(client: RawClient, topic: str, policy: str) -> None:
    configs = {"cleanup.policy": policy, "max.message.bytes": MAX_MESSAGE_BYTES}
    answer = client.call(CreateTopicsRequest(timeout_ms=10_000, topics=[CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])]), 5)
    assert answer is not None and answer.topics[0].error_code == 0, answer


def produce(client: RawClient, topic: str, batch: bytes) -> PartitionProduceResponse:
    answer = client.call(ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]), 11)
    assert answer is not None, "the broker closed the producing connection instead of answering"
    partition: PartitionProduceResponse = answer.responses[0].partition_responses[0]
    return partition


def latest_offset(client: RawClient, topic: str) -> int:
    answer = client.call(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    assert answer is not None and answer.topics[0].partitions[0].error_code == 0, answer
    return int(answer.topics[0].partitions[0].offset)


def honest(codec: str, count: int, value_size: int, keyless: tuple[int, ...] = ()) -> bytes:
    """A valid batch of `count` records (zeros for values: it compresses well), keys but at `keyless`."""
    records = [Record(i, 0, None if i in keyless else b"key-%d" % i, bytes(value_size)) for i in range(count)]
    return build_batch(records, base_timestamp=int(time.time() * 1000), compression=PAYLOADS[codec][0])


def assert_served(canary: Canary, broker: BrokerProcess) -> None:
    assert canary.latencies and canary.failures == 0, canary.summary()
    assert broker.is_running()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_is_refused_as_kafka_does_and_the_broker_serves_on(
        pybroker_only: None, broker: BrokerProcess, client: RawClient, new_topic: Callable[..., str],
        codec: str, policy: str) -> None:
    topic = new_topic(policy)
    create(client, topic, policy)
    with Canary(broker.host, broker.port) as canary:
        refused = produce(client, topic, bomb(codec))
        assert latest_offset(client, topic) == 0
        accepted = produce(client, topic, honest(codec, 3, 100))
    assert refused.error_code == ErrorCode.INVALID_RECORD, refused
    assert "record 0 length 0" in (refused.error_message or ""), refused
    assert [e.batch_index for e in refused.record_errors] == [0], refused
    assert (accepted.error_code, accepted.base_offset) == (0, 0), accepted
    assert latest_offset(client, topic) == 3
    assert_served(canary, broker)


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_without_a_bad_first_record_stops_at_the_cap(
        pybroker_only: None, broker: BrokerProcess, client: RawClient, new_topic: Callable[..., str],
        codec: str) -> None:
    topic = new_topic("compact")
    create(client, topic, "compact")
    size = 80 << 20 if codec in PAST_THE_CAP else 20 << 20  # snappy inflates about 21 times: under the cap
    batch = flagged_batch(compress(PAYLOADS[codec][0], GIB_RECORD + bytes(size)), PAYLOADS[codec][0])
    with Canary(broker.host, broker.port) as canary:
        refused = produce(client, topic, batch)
        assert latest_offset(client, topic) == 0
    if codec in PAST_THE_CAP:
        assert refused.error_code == ErrorCode.CORRUPT_MESSAGE, refused
        assert f"more than {MAX_DECOMPRESSED} bytes" in (refused.error_message or ""), refused
    else:  # the whole payload inflated (in the worker): its one record overruns it
        assert refused.error_code == ErrorCode.INVALID_RECORD, refused
        assert "overruns the batch" in (refused.error_message or ""), refused
    assert_served(canary, broker)


@pytest.mark.parametrize("codec", PAST_THE_CAP)
def test_a_bomb_behind_good_records_is_refused_for_its_first_bad_one(
        pybroker_only: None, broker: BrokerProcess, client: RawClient, new_topic: Callable[..., str],
        codec: str) -> None:
    """200 good records (200 KiB: more than the thread judges by) and then zeros past the cap: the worker
    finds record 200 malformed, as Kafka does reading them one after the other."""
    topic = new_topic("delete")
    create(client, topic, "delete")
    records = build_batch([Record(i, 0, b"key-%d" % i, bytes(1024)) for i in range(200)])[HEADER_SIZE:]
    codec_id = PAYLOADS[codec][0]
    with Canary(broker.host, broker.port) as canary:
        refused = produce(client, topic, flagged_batch(compress(codec_id, records + bytes(80 << 20)), codec_id, 300))
        assert latest_offset(client, topic) == 0
    assert refused.error_code == ErrorCode.INVALID_RECORD, refused
    assert [e.batch_index for e in refused.record_errors] == [200], refused
    assert_served(canary, broker)


@pytest.mark.parametrize("codec", CODECS)
def test_a_big_honest_batch_is_validated_whole_and_read_back(
        pybroker_only: None, broker: BrokerProcess, client: RawClient, new_topic: Callable[..., str],
        codec: str) -> None:
    """3 MiB of records inflate past the validation thread's budget (1 MiB): the worker process walks
    them; on a compacted topic a keyless record among them is named in the refusal, as Kafka names it."""
    topic = new_topic("compact")
    create(client, topic, "compact")
    keyless = produce(client, topic, honest(codec, 3000, 1024, keyless=(2500,)))
    assert keyless.error_code == ErrorCode.INVALID_RECORD, keyless
    assert [e.batch_index for e in keyless.record_errors] == [2500], keyless
    accepted = produce(client, topic, honest(codec, 3000, 1024))
    assert (accepted.error_code, accepted.base_offset) == (0, 0), accepted
    assert latest_offset(client, topic) == 3000
    tp = TopicPartition(topic, 0)
    seen: list[bytes] = []
    with kp_consumer(broker.bootstrap, max_partition_fetch_bytes=8 << 20, fetch_max_bytes=8 << 20) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 30
        while consumer.position(tp) < 3000 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                seen += [r.key for r in records]
    assert seen == [b"key-%d" % i for i in range(3000)]


def _validation_workers(pid: int) -> list[int]:
    """The broker's children started by multiprocessing (the pool's workers and its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in status and b"multiprocessing" in cmdline:
            found.append(int(entry.name))
    return found


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text():
                return False
        except OSError:
            continue
    return True


def test_validation_workers_die_with_the_broker(pybroker_only: None, broker_factory: Callable[..., BrokerProcess],
                                                new_topic: Callable[..., str]) -> None:
    broker = broker_factory()
    with RawClient(broker.host, broker.port, timeout=120) as raw:
        topic = new_topic("delete")
        create(raw, topic, "delete")
        assert produce(raw, topic, honest("gzip", 3000, 1024)).error_code == 0  # past the thread's budget
    pid = broker.pid
    assert pid is not None
    workers = _validation_workers(pid)
    assert workers, "no validation worker process was started"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not _gone(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(workers), f"validation workers {workers} outlived the killed broker"
