"""Reproducers for issue 11 items 1, 3 and 7 against a real broker: names and files the storage layer keeps.

1. A topic name ending in a newline was accepted (`$` matches before a final newline), even by a plain
   Metadata request's auto-create; it broke the line-based checkpoint files, the next start discarded
   them and DeleteRecords came undone. Illegal names now get INVALID_TOPIC_EXCEPTION and create nothing,
   and a DeleteRecords survives restarts (clean and SIGKILL), also beside a topic an older version let in.
3. Two concurrent DeleteRecords stopped the broker (exit 3 within 0.5 s): every checkpoint write shared
   one temp file name, and the losing rename's FileNotFoundError took the only log dir offline.
7. A legal 249-character topic could not be deleted: the `<dir>.<uuid>-delete` rename target passed
   255 bytes and DeleteTopics answered KAFKA_STORAGE_ERROR.

Each attack runs while a `Canary` on another connection sends ApiVersions; it must be served throughout
and the broker must still be running afterwards.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.batch import iter_batches
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.kraft_metadata import METADATA_DIR
from pybroker.storage.metadata_log import LIVE_MARK
from tests.integration.brokers import BrokerProcess
from tests.integration.hostile import Canary, RawClient

BrokerFactory = Callable[..., BrokerProcess]

ILLEGAL_NAMES = ["evil\n", "evil ", "x" * 250, "..", ".", "", "\nevil", "a/b", "évil"]
#: a bystander's median ApiVersions round trip must stay below this while the attack runs
CANARY_MEDIAN_MS = 50.0
LONGEST = "l" * 249


# -- wire helpers ---------------------------------------------------------------------------------------
def _create(client: RawClient, name: str, partitions: int = 1) -> int:
    answer = client.call(CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=partitions,
                                                                    replication_factor=1)], timeout_ms=10_000), 4)
    assert answer is not None
    return int(answer.topics[0].error_code)


def _metadata_codes(client: RawClient, names: list[str] | None, version: int = 1) -> dict[str, int]:
    """Topic name -> error code; `names=None` asks for every topic."""
    topics = None if names is None else [MetadataRequestTopic(name=n) for n in names]
    answer = client.call(MetadataRequest(topics=topics, allow_auto_topic_creation=True), version)
    assert answer is not None
    return {t.name: int(t.error_code) for t in answer.topics}


def _produce(client: RawClient, topic: str, partition: int, values: list[bytes]) -> int:
    batch = build_batch([Record(i, 0, b"k%d" % i, v) for i, v in enumerate(values)],
                        base_timestamp=int(time.time() * 1000))
    answer = client.call(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])]), 8)
    assert answer is not None
    return int(answer.responses[0].partition_responses[0].error_code)


def _delete_records(client: RawClient, topic: str, partition: int, offset: int) -> tuple[int, int]:
    """(error code, low watermark)."""
    answer = client.call(DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=topic, partitions=[
        DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=10_000), 1)
    assert answer is not None
    result = answer.topics[0].partitions[0]
    return int(result.error_code), int(result.low_watermark)


def _earliest(client: RawClient, topic: str, partition: int = 0) -> int:
    answer = client.call(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=topic, partitions=[
        ListOffsetsPartition(partition_index=partition, timestamp=-2)])]), 1)
    assert answer is not None
    result = answer.topics[0].partitions[0]
    assert result.error_code == 0, result
    return int(result.offset)


def _read(client: RawClient, topic: str, partition: int, offset: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record from `offset` to the log end."""
    answer = client.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 22, topics=[
        FetchTopic(topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=offset,
                                                           partition_max_bytes=1 << 22)])]), 11)
    assert answer is not None
    data = answer.responses[0].partitions[0]
    assert data.error_code == 0, data
    records = bytes(data.records or b"")
    out = []
    for position, header in iter_batches(records):
        out += [(header.base_offset + r.offset_delta, r.value) for r in decode_records(records, position, header)]
    return [(o, v) for o, v in out if o >= offset]


def _client(proc: BrokerProcess) -> RawClient:
    return RawClient(proc.host, proc.port)


def _served(canary: Canary, proc: BrokerProcess) -> None:
    assert proc.is_running(), proc.log_tail()
    assert canary.failures == 0 and canary.latencies, canary.summary()
    assert canary.median_ms < canary.allowed_ms(CANARY_MEDIAN_MS), canary.summary()


def _fill(proc: BrokerProcess, topic: str, partitions: int, count: int) -> list[bytes]:
    values = [b"value-%d" % i for i in range(count)]
    with _client(proc) as client:
        assert _create(client, topic, partitions) == ErrorCode.NONE
        for partition in range(partitions):
            assert _produce(client, topic, partition, values) == ErrorCode.NONE
    return values


# -- item 1 ---------------------------------------------------------------------------------------------
def test_illegal_topic_names_are_refused_and_delete_records_survive_restarts(
        broker_factory: BrokerFactory, new_topic: Callable[[str], str]) -> None:
    proc = broker_factory({"auto.create.topics.enable": "true"}, needs_restart=True)
    data_dir = proc.log_dirs[0]
    with Canary(proc.host, proc.port) as canary, _client(proc) as client:
        for name in ILLEGAL_NAMES:
            assert _create(client, name) == ErrorCode.INVALID_TOPIC_EXCEPTION, repr(name)
            for version in (1, 4, 12):  # v1 auto-creates on any Metadata; v4+ when allowed (it is)
                assert _metadata_codes(client, [name], version)[name] == ErrorCode.INVALID_TOPIC_EXCEPTION, \
                    (repr(name), version)
            assert _produce(client, name, 0, [b"x"]) != ErrorCode.NONE, repr(name)
        listed = _metadata_codes(client, None)
    _served(canary, proc)
    assert not set(ILLEGAL_NAMES) & set(listed)
    assert not [p.name for p in data_dir.iterdir() if p.is_dir() and "evil" in p.name]
    table = data_dir / "pybroker-topics.json"  # written with the first topic
    assert not table.exists() or not {t["name"] for t in json.loads(table.read_text())["topics"]} & set(ILLEGAL_NAMES)

    topic = new_topic("kept")
    values = _fill(proc, topic, 1, 10)
    with _client(proc) as client:
        assert _delete_records(client, topic, 0, 5) == (ErrorCode.NONE, 5)
        assert _earliest(client, topic) == 5
    for kill in (False, True):
        proc.restart(kill=kill)
        with _client(proc) as client:
            assert _earliest(client, topic) == 5, f"DeleteRecords undone by a {'kill' if kill else 'restart'}"
            assert _read(client, topic, 0, 5) == list(enumerate(values))[5:]


def test_a_topic_an_older_version_let_in_does_not_undo_the_others_delete_records(
        broker_factory: BrokerFactory, new_topic: Callable[[str], str]) -> None:
    proc = broker_factory(needs_restart=True)
    data_dir = proc.log_dirs[0]
    topic = new_topic("kept")
    values = _fill(proc, topic, 1, 10)
    with _client(proc) as client:
        assert _delete_records(client, topic, 0, 5) == (ErrorCode.NONE, 5)
    proc.stop()
    # what an older version wrote after accepting "evil\n": the name in the topic table
    path = data_dir / "pybroker-topics.json"
    table = json.loads(path.read_text())
    table["topics"].append({"name": "evil\n", "topic_id": "00000000-0000-0000-0000-00000000e71c",
                            "partitions": 1, "configs": {}})
    table["version"] += 1
    path.write_text(json.dumps(table))
    # an older version kept no live metadata log: its JSON stores were the metadata, which the next start
    # takes as the log's first snapshot
    (data_dir / LIVE_MARK).unlink()
    shutil.rmtree(data_dir / METADATA_DIR)
    proc.start()
    with Canary(proc.host, proc.port) as canary, _client(proc) as client:
        assert _produce(client, "evil\n", 0, [b"old"]) == ErrorCode.NONE  # it still works, as it did
        assert _delete_records(client, topic, 0, 6) == (ErrorCode.NONE, 6)
    _served(canary, proc)
    for kill in (True, False):
        proc.restart(kill=kill)
        with _client(proc) as client:
            assert _earliest(client, topic) == 6
            assert _read(client, topic, 0, 6) == list(enumerate(values))[6:]
            assert _read(client, "evil\n", 0, 0) == [(0, b"old")]
    with _client(proc) as client:  # and the operator can delete it
        answer = client.call(DeleteTopicsRequest(topic_names=["evil\n"], timeout_ms=10_000), 3)
        assert answer is not None and answer.responses[0].error_code == ErrorCode.NONE, answer
    proc.restart()
    assert not [p.name for p in data_dir.iterdir() if p.name.startswith("evil")]
    with _client(proc) as client:
        assert "evil\n" not in _metadata_codes(client, None) and _earliest(client, topic) == 6


# -- item 3 ---------------------------------------------------------------------------------------------
def test_concurrent_delete_records_never_stop_the_broker(broker_factory: BrokerFactory,
                                                         new_topic: Callable[[str], str]) -> None:
    partitions, rounds, records = 4, 40, 100
    proc = broker_factory(needs_restart=True)
    topic = new_topic("dr")
    _fill(proc, topic, partitions, records)
    clients = [_client(proc) for _ in range(partitions * 2)]
    barrier = threading.Barrier(len(clients))
    answers: dict[int, list[tuple[int, int, int]]] = {i: [] for i in range(len(clients))}

    def attack(index: int) -> None:
        client, partition = clients[index], index % partitions
        for round_ in range(rounds):
            barrier.wait(timeout=30)
            offset = 2 * round_ + 1 + index // partitions  # the two clients of a partition race too
            answers[index].append((offset, *_delete_records(client, topic, partition, offset)))

    with Canary(proc.host, proc.port) as canary:
        threads = [threading.Thread(target=attack, args=(i,), daemon=True) for i in range(len(clients))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    for client in clients:
        client.close()
    _served(canary, proc)
    for index, rows in answers.items():
        assert len(rows) == rounds, f"client {index} got {len(rows)} answers"
        for offset, error, low in rows:
            assert error == ErrorCode.NONE and low >= offset, (index, offset, error, low)
    final = 2 * (rounds - 1) + 2
    with _client(proc) as client:
        assert [_earliest(client, topic, p) for p in range(partitions)] == [final] * partitions
    for kill in (False, True):
        proc.restart(kill=kill)
        with _client(proc) as client:
            assert [_earliest(client, topic, p) for p in range(partitions)] == [final] * partitions
            assert [o for o, _ in _read(client, topic, 0, final)] == list(range(final, records))


# -- item 7 ---------------------------------------------------------------------------------------------
def test_a_topic_with_the_longest_legal_name_is_deleted(broker_factory: BrokerFactory) -> None:
    proc = broker_factory(needs_restart=True)
    data_dir = proc.log_dirs[0]
    with Canary(proc.host, proc.port) as canary, _client(proc) as client:
        assert _create(client, LONGEST, 2) == ErrorCode.NONE
        for partition in range(2):
            assert _produce(client, LONGEST, partition, [b"a", b"b", b"c"]) == ErrorCode.NONE
        assert (data_dir / f"{LONGEST}-1").is_dir()
        answer = client.call(DeleteTopicsRequest(topic_names=[LONGEST], timeout_ms=10_000), 3)
        assert answer is not None and answer.responses[0].error_code == ErrorCode.NONE, answer
        deadline = time.monotonic() + 10
        while [p for p in data_dir.iterdir() if p.name.startswith(LONGEST[:200])] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p.name for p in data_dir.iterdir() if p.name.startswith(LONGEST[:200])]
        assert LONGEST not in _metadata_codes(client, None)
    _served(canary, proc)
    proc.restart()
    with _client(proc) as client:
        assert LONGEST not in _metadata_codes(client, None)
        assert _create(client, LONGEST, 1) == ErrorCode.NONE  # and the name can be had again
        assert _produce(client, LONGEST, 0, [b"again"]) == ErrorCode.NONE
        assert _read(client, LONGEST, 0, 0) == [(0, b"again")]
    proc.stop()


@pytest.mark.parametrize("kill", [False, True])
def test_startup_removes_a_shortened_delete_dir(broker_factory: BrokerFactory, kill: bool) -> None:
    """A crash between the rename and the removal leaves `<cut topic>-0.<uuid>-delete`; startup removes it."""
    proc = broker_factory(needs_restart=True)
    data_dir = proc.log_dirs[0]
    with _client(proc) as client:
        assert _create(client, LONGEST, 1) == ErrorCode.NONE
        assert _produce(client, LONGEST, 0, [b"x"]) == ErrorCode.NONE
    if kill:
        proc.kill9()
    else:
        proc.stop()
    leftover = data_dir / f"{LONGEST[:200]}-0.{'0' * 32}-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"junk")
    (data_dir / "log-start-offset-checkpoint.0123456789abcdef.tmp").write_bytes(b"0\n1\nhalf")
    proc.start()
    assert not leftover.exists() and not list(Path(data_dir).glob("*.tmp"))
    with _client(proc) as client:
        assert _read(client, LONGEST, 0, 0) == [(0, b"x")]
    proc.stop()
