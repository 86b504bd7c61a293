"""A topic change a client walks away from still ends, with its follow-up, and the broker knows it is under way.

Found by the fuzz run's restart oracle: a DeleteTopics whose connection closed went on on its worker
thread after the request was cancelled, unseen, so the broker's state changed under a snapshot, and the
fetches waiting on the deleted partitions were never woken.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.detached_work import DetachedWork
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.storage.log_manager import LogManager
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.waiting import until


async def test_cancelling_the_request_leaves_the_work_and_its_follow_up_running() -> None:
    work = DetachedWork()
    release = threading.Event()
    followed: list[str] = []
    answer = work.run(lambda: release.wait(10) and "done", then=lambda: followed.append("then"))
    await asyncio.sleep(0.01)
    answer.cancel()
    await asyncio.sleep(0)
    assert work.pending == 1 and not followed
    assert not await work.wait(0.01)  # still under way
    release.set()
    assert await work.wait(10)
    assert followed == ["then"] and work.pending == 0


async def test_a_failure_of_the_work_still_runs_the_follow_up_and_reaches_the_request() -> None:
    work = DetachedWork()
    followed: list[str] = []

    def fail() -> None:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        await work.run(fail, then=lambda: followed.append("then"))
    assert followed == ["then"] and work.pending == 0


async def test_a_deletion_whose_client_left_ends_and_wakes_the_fetch_waiting_on_it(
        client: RawClient, app: BrokerApp, monkeypatch: pytest.MonkeyPatch) -> None:
    create = CreateTopicsRequest(topics=[CreatableTopic(name="gone", num_partitions=1, replication_factor=1)])
    assert (await client.call(create, 7)).topics[0].error_code == ErrorCode.NONE
    release = threading.Event()
    real_delete = LogManager.delete_topics

    def held_delete(self: LogManager, names: list[str]) -> Any:
        release.wait(10)  # until the deleting client is gone
        return real_delete(self, names)

    monkeypatch.setattr(LogManager, "delete_topics", held_delete)
    await client.send(FetchRequest(max_wait_ms=30_000, min_bytes=1, max_bytes=1 << 20, topics=[
        FetchTopic(topic="gone", topic_id=uuid.UUID(int=0), partitions=[
            FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), 12)
    await until(lambda: len(app.state.purgatory) == 1, "the fetch was never parked")

    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    await RawClient(reader, writer).send(DeleteTopicsRequest(topic_names=["gone"], timeout_ms=5000), 5)
    await until(lambda: app.state.detached.pending == 1, "the deletion never started")
    host, port = writer.get_extra_info("sockname")[:2]
    deleting = next(conn for conn in app.state.connections if conn.peer == f"{host}:{port}")
    deleting.transport.abort()  # the connection is lost (a reset): its requests are cancelled
    await until(lambda: deleting.closed and not deleting.pending, "the deleting connection never closed")
    assert app.state.detached.pending == 1  # the deletion goes on
    writer.close()
    release.set()

    assert await app.state.detached.wait(10)
    assert "gone" not in app.state.logs.topics()
    fetched = await client.receive(1, 12, timeout=10)  # woken by the deletion, not by its 30 s max wait
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_the_stop_waits_for_a_change_under_way(app: BrokerApp, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    ended: list[bool] = []
    app.state.detached.run(lambda: ended.append(release.wait(10)))
    stopping = asyncio.ensure_future(app.stop())
    await asyncio.sleep(0.05)
    assert not stopping.done()
    release.set()
    await stopping
    assert ended == [True]
