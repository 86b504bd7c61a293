"""Reproducers of issue 11's connection-layer items against a real `pybroker start` process.

- item 5: clients that start 100 MB requests and stall cannot take the broker's memory;
- item 10: a connection's requests take effect in the order they were sent;
- connection limits: `max.connections.per.ip`;
- item 11: bad frames cannot fill the disk with log lines.

Each also proves the broker kept serving a bystander (the `Canary`, on a connection of its own) and is
still running afterwards.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_flush, ck_producer, ck_read
from tests.integration.hostile import Canary, RawClient, rss_bytes

MB = 1_000_000
MIB = 1 << 20
#: the default queued.max.request.bytes
POOL_BYTES = 200 * MIB


def _produce(topic: str, n: int, acks: int = 1) -> ProduceRequest:
    records = build_batch([Record(i, 0, b"k", b"v%d" % i) for i in range(n)], base_timestamp=int(time.time() * 1000))
    return ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])])


def _create(client: RawClient, topic: str) -> None:
    answer = client.call(CreateTopicsRequest(topics=[CreatableTopic(name=topic, num_partitions=1,
                                                                     replication_factor=1)], timeout_ms=10_000), 5)
    assert answer is not None and answer.topics[0].error_code == 0


def _serving(broker: BrokerProcess) -> bool:
    with RawClient(broker.host, broker.port) as client:
        answer = client.call(ApiVersionsRequest(), 0)
        return answer is not None and answer.error_code == 0


def _wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout}s"
        time.sleep(0.1)


class _RawFrom(RawClient):
    """A raw client whose connection comes from another loopback address (its own per-IP count)."""

    def __init__(self, host: str, port: int, source_ip: str, timeout: float = 10.0) -> None:
        super().__init__(host, port, timeout)
        self.sock.close()
        self.sock = socket.create_connection((host, port), timeout=timeout, source_address=(source_ip, 0))
        self.sock.settimeout(timeout)


# -- item 5 --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_partial_big_frames_cannot_exhaust_memory(broker_factory: Callable[..., BrokerProcess],
                                                  new_topic: Callable[[str], str]) -> None:
    """8 connections x 95 MB of a 100 MB frame: RSS stays within idle + the pool + a margin, others
    keep producing and consuming, and the attackers are closed once they stall."""
    broker = broker_factory({"connections.max.idle.ms": "3000"})  # stalled frames closed after 3 s
    pid = broker.pid
    assert pid is not None
    time.sleep(0.5)
    idle_rss = rss_bytes(pid)
    bound = idle_rss + POOL_BYTES + 80 * MB
    topic = new_topic("bystander")
    attackers = [RawClient(broker.host, broker.port, timeout=2.0) for _ in range(8)]
    sent = [0] * len(attackers)

    def attack(index: int) -> None:
        chunk = b"\0" * MIB
        client = attackers[index]
        try:
            client.send_raw(struct.pack(">i", 100 * MB))
            while sent[index] < 95 * MB:
                sent[index] += client.sock.send(chunk[: min(MIB, 95 * MB - sent[index])])
        except OSError:
            pass  # paused by the broker (send timed out) or closed by it

    threads = [threading.Thread(target=attack, args=(i,), daemon=True) for i in range(len(attackers))]
    peak = idle_rss
    with Canary(broker.host, broker.port) as canary:
        for thread in threads:
            thread.start()
        producer = ck_producer(broker.bootstrap)
        for i in range(200):
            producer.produce(topic, value=b"during the attack %d" % i)
            peak = max(peak, rss_bytes(pid))
        ck_flush(producer)
        read = ck_read(broker.bootstrap, topic, 1, expected=200)
        assert len(read[0]) == 200
        deadline = time.monotonic() + 30
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            peak = max(peak, rss_bytes(pid))
            time.sleep(0.1)
        for client in attackers:  # every attacker is closed once it stalls (or waits) past the timeout
            assert client.closed_by_peer(timeout=15), "an attacker's connection was never closed"
            peak = max(peak, rss_bytes(pid))
    for client in attackers:
        client.close()
    print(f"big-frame attack: RSS idle {idle_rss / MB:.0f} MB, peak {peak / MB:.0f} MB (bound {bound / MB:.0f} MB), "
          f"{sum(sent) / MB:.0f} MB sent; bystander: {canary.summary()}")
    assert peak <= bound, f"RSS {peak / MB:.0f} MB > bound {bound / MB:.0f} MB (idle {idle_rss / MB:.0f} MB)"
    assert sum(sent) >= 95 * MB, "the attack never got going"
    assert canary.failures == 0 and canary.median_ms < canary.allowed_ms(50), canary.summary()
    _wait_until(lambda: rss_bytes(pid) < idle_rss + 80 * MB, 10, "memory given back")
    assert broker.is_running() and _serving(broker)


# -- item 10 -------------------------------------------------------------------------------------------
def _delete(topic: str, offset: int) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(timeout_ms=10_000, topics=[
        DeleteRecordsTopic(name=topic, partitions=[DeleteRecordsPartition(partition_index=0, offset=offset)])])


def _earliest(topic: str) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-2, max_num_offsets=1)])])


def test_list_offsets_pipelined_behind_delete_records_sees_the_new_start(
        broker: BrokerProcess, new_topic: Callable[[str], str]) -> None:
    topic = new_topic("order")
    with Canary(broker.host, broker.port) as canary, RawClient(broker.host, broker.port) as client:
        _create(client, topic)
        answer = client.call(_produce(topic, 200), 9)
        assert answer is not None and answer.responses[0].partition_responses[0].error_code == 0
        for start in range(1, 101, 2):  # 50 rounds
            client.send(_delete(topic, start), 2)
            client.send(_earliest(topic), 7)
            deleted = client.receive(ApiKey.DELETE_RECORDS, 2)
            listed = client.receive(ApiKey.LIST_OFFSETS, 7)
            assert deleted is not None and listed is not None
            assert deleted.topics[0].partitions[0].low_watermark == start
            assert listed.topics[0].partitions[0].offset == start, f"round starting at {start}"
    assert canary.failures == 0 and canary.median_ms < canary.allowed_ms(50), canary.summary()
    assert broker.is_running()


def test_acks_all_produce_and_the_produce_behind_it_are_both_answered_in_order(
        broker: BrokerProcess, new_topic: Callable[[str], str]) -> None:
    """An acks=all produce only waits for its fsync: the next produce proceeds, answers keep their order."""
    topic = new_topic("overlap")
    with Canary(broker.host, broker.port) as canary, RawClient(broker.host, broker.port) as client:
        _create(client, topic)
        for round_ in range(20):
            client.send(_produce(topic, 3, acks=-1), 9)
            client.send(_produce(topic, 2, acks=-1), 9)
            first: Any = client.receive(ApiKey.PRODUCE, 9)
            second: Any = client.receive(ApiKey.PRODUCE, 9)
            assert first is not None and second is not None
            assert first.responses[0].partition_responses[0].base_offset == 5 * round_
            assert second.responses[0].partition_responses[0].base_offset == 5 * round_ + 3
    assert canary.failures == 0, canary.summary()


# -- connection limits ---------------------------------------------------------------------------------
def test_max_connections_per_ip(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({"max.connections.per.ip": "5"})
    source = "127.0.0.2"  # the attacker's address; the canary and the harness use 127.0.0.1
    with Canary(broker.host, broker.port) as canary:
        clients = [_RawFrom(broker.host, broker.port, source) for _ in range(5)]
        sixth = _RawFrom(broker.host, broker.port, source)
        assert sixth.closed_by_peer(timeout=5), "the 6th connection from one IP was not closed"
        sixth.close()
        for client in clients:
            answer = client.call(ApiVersionsRequest(), 0)
            assert answer is not None and answer.error_code == 0
        clients.pop(0).close()

        def accepted_again() -> bool:
            with _RawFrom(broker.host, broker.port, source) as again:
                answer = again.call(ApiVersionsRequest(), 0)
                return answer is not None and answer.error_code == 0

        _wait_until(accepted_again, 5, "a connection accepted after one closed")
        for client in clients:
            client.close()
    assert canary.failures == 0 and canary.median_ms < canary.allowed_ms(50), canary.summary()
    assert "max.connections.per.ip" in broker.log_path.read_text()
    assert broker.is_running() and _serving(broker)


# -- item 11 -------------------------------------------------------------------------------------------
BAD_FRAMES = (
    struct.pack(">i", -1),  # negative size
    struct.pack(">i", 2**31 - 1),  # over socket.request.max.bytes
    struct.pack(">i", 10) + struct.pack(">hhih", 9999, 0, 1, 0),  # unknown api key
    struct.pack(">i", 14) + struct.pack(">hhih", 3, 1, 1, 0) + b"\xff\xff\xff\x7f",  # undecodable Metadata
)


def test_bad_frames_write_a_bounded_number_of_log_lines(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory()
    before = len(broker.log_path.read_text().splitlines())
    sent = 0
    with Canary(broker.host, broker.port) as canary:
        while sent < 2000:
            batch = []
            for _ in range(50):  # 50 connections at a time, each closed by its bad frame
                sock = socket.create_connection((broker.host, broker.port), timeout=5)
                sock.sendall(BAD_FRAMES[sent % len(BAD_FRAMES)])
                batch.append(sock)
                sent += 1
            for sock in batch:
                sock.settimeout(5)
                with contextlib.suppress(ConnectionResetError):
                    assert sock.recv(1) == b""
                sock.close()
    assert broker.is_running() and _serving(broker)
    lines = broker.log_path.read_text().splitlines()[before:]
    closing = [line for line in lines if "closing connection" in line]
    print(f"{sent} bad frames: {len(lines)} log lines, {sum(len(line) for line in lines)} bytes")
    assert 1 <= len(closing) <= 40, f"{len(lines)} lines for {sent} bad frames"  # 10 per kind and minute
    assert len(lines) <= 60
    assert sum(len(line) for line in lines) < 30_000
    assert canary.failures == 0 and canary.median_ms < canary.allowed_ms(50), canary.summary()
