"""A connection's requests take effect in order: work holds back later requests, pure waits do not.

Handlers are swapped for fakes gated by events, so each test controls exactly when a request's work or
wait ends and can look at what has started meanwhile. An in-process broker on an ephemeral port.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.dispatch import REGISTRY, waiting
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient


@pytest.fixture
def swap() -> Iterator[Callable[[int, Callable[[Any, Any, Callable[..., Any]], Any]], None]]:
    """swap(api_key, fake): fake(ctx, request, real) serves api_key for this test."""
    saved: dict[int, Any] = {}

    def install(api_key: int, fake: Callable[[Any, Any, Callable[..., Any]], Any]) -> None:
        spec = REGISTRY[api_key]
        saved.setdefault(api_key, spec)
        real = saved[api_key].fn
        REGISTRY[api_key] = dataclasses.replace(spec, fn=lambda ctx, request: fake(ctx, request, real))

    yield install
    REGISTRY.update(saved)


def _produce(topic: str, n: int, acks: int = 1) -> ProduceRequest:
    records = build_batch([Record(i, 0, b"k", b"v") for i in range(n)], base_timestamp=int(time.time() * 1000))
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])])


def _delete(topic: str, offset: int) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(timeout_ms=5000, topics=[
        DeleteRecordsTopic(name=topic, partitions=[DeleteRecordsPartition(partition_index=0, offset=offset)])])


def _earliest(topic: str) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-2, max_num_offsets=1)])])


async def _eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_slow_delete_records_takes_effect_before_the_pipelined_list_offsets(
        client: RawClient, swap: Any) -> None:
    """Item 10: the ListOffsets right behind a DeleteRecords (work off the loop) sees the new start."""

    async def slow(work: Any) -> Any:
        await asyncio.sleep(0.05)  # the next request would run meanwhile if nothing held it back
        return await work

    swap(ApiKey.DELETE_RECORDS, lambda ctx, request, real: slow(real(ctx, request)))
    await client.call(_produce("ordered", 20), 9)
    for offset in (3, 7, 12):
        await client.send(_delete("ordered", offset), 2)
        await client.send(_earliest("ordered"), 7)
        deleted = await client.receive(ApiKey.DELETE_RECORDS, 2)
        listed = await client.receive(ApiKey.LIST_OFFSETS, 7)
        assert deleted.topics[0].partitions[0].low_watermark == offset
        assert listed.topics[0].partitions[0].offset == offset


async def test_work_holds_back_later_requests_and_reading_until_it_completes(
        app: BrokerApp, client: RawClient, swap: Any) -> None:
    release = asyncio.Event()
    started: list[int] = []

    async def gated(work: Any) -> Any:
        await release.wait()
        return await work

    swap(ApiKey.DELETE_RECORDS, lambda ctx, request, real: gated(real(ctx, request)))

    def recording(ctx: Any, request: Any, real: Any) -> Any:
        started.append(ctx.correlation_id)
        return real(ctx, request)

    swap(ApiKey.LIST_OFFSETS, recording)
    await client.call(_produce("held", 5), 9)
    first = await client.send(_delete("held", 2), 2)
    later = [await client.send(_earliest("held"), 7) for _ in range(3)]
    (conn,) = list(app.state.connections)
    await _eventually(lambda: conn._busy is not None and len(conn._backlog) == 3)
    await asyncio.sleep(0.05)
    assert started == [] and not conn._reading  # nothing started behind the work, nothing more read
    # another connection is not held back
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    other = RawClient(reader, writer)
    assert (await other.call(ApiVersionsRequest(), 0)).error_code == 0
    other.close()
    release.set()
    assert (await client.receive(ApiKey.DELETE_RECORDS, 2)).topics[0].partitions[0].low_watermark == 2
    for _ in later:
        assert (await client.receive(ApiKey.LIST_OFFSETS, 7)).topics[0].partitions[0].offset == 2
    assert started == later and first < later[0]
    assert conn._reading and conn._busy is None and not conn._backlog


async def test_a_pure_wait_lets_the_next_request_start_and_answers_stay_in_order(
        app: BrokerApp, client: RawClient, swap: Any) -> None:
    release = asyncio.Event()
    started: list[int] = []

    async def answer_later(response: Any) -> Any:
        await release.wait()
        return response

    # a pure wait: the handler's effects are done, only its answer waits
    swap(ApiKey.DELETE_RECORDS, lambda ctx, request, real: waiting(answer_later(_done_response(request))))

    def recording(ctx: Any, request: Any, real: Any) -> Any:
        started.append(ctx.correlation_id)
        return real(ctx, request)

    swap(ApiKey.LIST_OFFSETS, recording)
    await client.call(_produce("waits", 5), 9)
    first = await client.send(_delete("waits", 1), 2)
    second = await client.send(_earliest("waits"), 7)
    await _eventually(lambda: started == [second])  # started while the first still waits
    (conn,) = list(app.state.connections)
    assert conn._busy is None and conn._reading
    await asyncio.sleep(0.05)
    assert len(conn.pending) == 2  # but its answer is held behind the first one's
    release.set()
    assert (await client.receive(ApiKey.DELETE_RECORDS, 2)).topics[0].partitions[0].partition_index == 0
    assert (await client.receive(ApiKey.LIST_OFFSETS, 7)).topics[0].partitions[0].offset == 0
    assert first < second


def _done_response(request: DeleteRecordsRequest) -> Any:
    from pybroker.protocol.messages.delete_records import (
        DeleteRecordsPartitionResult,
        DeleteRecordsResponse,
        DeleteRecordsTopicResult,
    )

    return DeleteRecordsResponse(topics=[DeleteRecordsTopicResult(name=t.name, partitions=[
        DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1) for p in t.partitions])
        for t in request.topics])


async def test_failed_work_closes_the_connection_before_anything_behind_it_starts(
        app: BrokerApp, client: RawClient, swap: Any, capsys: pytest.CaptureFixture[str]) -> None:
    started: list[int] = []

    async def broken() -> Any:
        await asyncio.sleep(0.02)
        raise RuntimeError("disk on fire")

    swap(ApiKey.DELETE_RECORDS, lambda ctx, request, real: broken())

    def recording(ctx: Any, request: Any, real: Any) -> Any:
        started.append(ctx.correlation_id)
        return real(ctx, request)

    swap(ApiKey.LIST_OFFSETS, recording)
    await client.send(_delete("broken", 1), 2)
    await client.send(_earliest("broken"), 7)
    assert await asyncio.wait_for(client.reader.read(), 5) == b""
    assert started == []
    # the broker still serves others
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    other = RawClient(reader, writer)
    assert (await other.call(ApiVersionsRequest(), 0)).error_code == 0
    other.close()


async def test_acks_all_produce_overlaps_the_next_produce(client: RawClient) -> None:
    """A produce waiting for its fsync is a pure wait: the next one is appended meanwhile, answers in order."""
    await client.call(_produce("overlap", 1), 9)
    ids = [await client.send(_produce("overlap", 2, acks=-1), 9) for _ in range(20)]
    offsets = []
    for _ in ids:
        answer = await client.receive(ApiKey.PRODUCE, 9)
        offsets.append(answer.responses[0].partition_responses[0].base_offset)
    assert offsets == [1 + 2 * i for i in range(20)]


async def test_work_that_ends_in_a_pure_wait_releases_the_connection(
        app: BrokerApp, client: RawClient, swap: Any) -> None:
    """A compressed acks=all produce: work (validated off the loop, appended), then only an fsync wait.
    Once its work is done the next request starts, though its answer still goes out first."""
    release = asyncio.Event()
    started: list[int] = []

    async def answer_later(response: Any) -> Any:
        await release.wait()
        return response

    async def work_then_wait(request: Any) -> Any:
        await asyncio.sleep(0.02)  # the work part: nothing may start behind it
        assert started == []
        return waiting(answer_later(_done_response(request)))

    swap(ApiKey.DELETE_RECORDS, lambda ctx, request, real: work_then_wait(request))

    def recording(ctx: Any, request: Any, real: Any) -> Any:
        started.append(ctx.correlation_id)
        return real(ctx, request)

    swap(ApiKey.LIST_OFFSETS, recording)
    await client.call(_produce("settles", 5), 9)
    first = await client.send(_delete("settles", 1), 2)
    second = await client.send(_earliest("settles"), 7)
    await _eventually(lambda: started == [second])  # the work ended: the next request started
    (conn,) = list(app.state.connections)
    assert conn._busy is None and len(conn.pending) == 2
    release.set()
    assert (await client.receive(ApiKey.DELETE_RECORDS, 2)).topics[0].partitions[0].partition_index == 0
    assert (await client.receive(ApiKey.LIST_OFFSETS, 7)).topics[0].partitions[0].offset == 0
    assert first < second


async def test_work_that_ends_in_no_answer_keeps_its_place(client: RawClient, swap: Any) -> None:
    """acks=0 work (a compressed batch validated off the loop) answers nothing, and what follows waits."""
    async def silent(work: Any) -> None:
        await asyncio.sleep(0.02)
        await work
        return None

    swap(ApiKey.DELETE_RECORDS, lambda ctx, request, real: silent(real(ctx, request)))
    await client.call(_produce("silent", 9), 9)
    await client.send(_delete("silent", 4), 2)  # no answer will come for this one
    listed = await client.call(_earliest("silent"), 7)
    assert listed.topics[0].partitions[0].offset == 4


async def test_answers_ready_together_go_to_the_socket_in_one_write(
        app: BrokerApp, client: RawClient, swap: Any) -> None:
    """A group commit releases many acks=all answers of one connection at once: one send, not one each."""
    release = asyncio.Event()

    async def answer_later(response: Any) -> Any:
        await release.wait()
        return response

    swap(ApiKey.DELETE_RECORDS, lambda ctx, request, real: waiting(answer_later(_done_response(request))))
    await client.call(_produce("together", 5), 9)
    (conn,) = list(app.state.connections)
    writes: list[int] = []

    class Counting:
        def __init__(self, real: Any) -> None:
            self.real = real

        def write(self, chunks: Any) -> None:
            writes.append(len(chunks))
            self.real.write(chunks)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    conn.writer = Counting(conn.writer)  # type: ignore[assignment]
    sent = [await client.send(_delete("together", 1), 2) for _ in range(3)]
    await _eventually(lambda: len(conn.pending) == 3)
    release.set()
    for _ in sent:
        assert (await client.receive(ApiKey.DELETE_RECORDS, 2)).topics[0].name == "together"
    assert len(writes) == 1 and writes[0] >= 3
