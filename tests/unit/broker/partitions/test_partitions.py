"""The partition layer: the delayed-operation primitive, the purgatory, and Partition's append, read and wait."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
from pybroker.broker.partitions.delayed import Completed, DelayedOperation, all_of
from pybroker.broker.partitions.partition import ACKS_ALL, Partition
from pybroker.broker.partitions.purgatory import Purgatory
from pybroker.broker.state import BrokerState
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.batch import parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.flusher import Flusher
from pybroker.storage.log import Log
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.waiting import until


class Flag(DelayedOperation[str]):
    """Completes once `up` is set; counts its checks."""

    __slots__ = ("checks", "up")

    def __init__(self) -> None:
        super().__init__()
        self.up = False
        self.checks = 0

    def ready(self) -> bool:
        self.checks += 1
        return self.up

    def answer(self) -> str:
        return "up" if self.up else "expired"


class Broken(DelayedOperation[int]):
    __slots__ = ("check_fails",)

    def __init__(self, check_fails: bool = False) -> None:
        super().__init__()
        self.check_fails = check_fails

    def ready(self) -> bool:
        if self.check_fails:
            raise OSError("bad check")
        return True

    def answer(self) -> int:
        raise ValueError("bad answer")


async def test_an_operation_completes_once_its_check_holds_and_calls_back_once() -> None:
    op = Flag()
    seen: list[str] = []
    op.on_done(lambda o: seen.append(o.value))
    assert not op.try_complete() and not op.done
    op.up = True
    assert op.try_complete() and op.try_complete()  # the second is a no-op
    assert (op.value, seen, await op, await op.future()) == ("up", ["up"], "up", "up")
    late: list[str] = []
    op.on_done(lambda o: late.append(o.value))  # after completion: called at once
    assert late == ["up"]


async def test_the_deadline_forces_completion_and_an_answer_that_raises_reaches_the_waiter() -> None:
    op = Flag()
    op.expire_after(0.01)
    assert await asyncio.wait_for(op, 2) == "expired"
    broken = Broken()
    waiter = broken.future()
    broken.try_complete()
    with pytest.raises(ValueError, match="bad answer"):
        await waiter
    failing = Broken(check_fails=True)
    assert failing.try_complete()  # a check that raises completes the operation with the error
    with pytest.raises(OSError, match="bad check"):
        await failing


async def test_all_of_completes_when_its_last_part_does_with_then_of_the_results() -> None:
    parts = [Flag(), Flag()]
    combined = all_of([*parts, Completed("x")], lambda values: "+".join(values))
    assert not combined.done
    parts[1].up = True
    parts[1].try_complete()
    assert not combined.done
    parts[0].force_complete()
    assert combined.done and combined.value == "expired+up+x"
    assert all_of([Completed(1), Completed(2)]).value == [1, 2]  # complete at once: no wait


async def test_purgatory_checks_only_watchers_of_the_key_and_forgets_completed_ones() -> None:
    purgatory = Purgatory()
    a, b = Flag(), Flag()
    purgatory.watch(a, [("t", 0), ("t", 1)])
    purgatory.watch(b, [("t", 1)])
    assert len(purgatory) == 3
    purgatory.notify(("t", 0))
    assert (a.checks, b.checks) == (1, 0)
    a.up = True
    purgatory.notify(("t", 1))
    assert a.done and not b.done and len(purgatory) == 1  # a left both of its keys
    purgatory.wake_all()  # shutdown: everyone answers with what they have
    assert b.done and b.value == "expired" and len(purgatory) == 0
    late = Flag()
    purgatory.watch(late, [("t", 0)])
    assert late.done  # watched after shutdown: completes at once, never waits


async def test_a_cancelled_wait_leaves_the_purgatory_at_once_not_at_its_deadline() -> None:
    purgatory = Purgatory()
    op = Flag()
    purgatory.watch(op, [("t", 0)])
    op.expire_after(3600)  # a client may ask for a very long wait
    op.future().cancel()  # its connection closed
    await asyncio.sleep(0)
    assert op.done and len(purgatory) == 0 and op.checks == 0
    with pytest.raises(asyncio.CancelledError):
        _ = op.value


@pytest.fixture
def state(tmp_path: Path) -> Iterator[BrokerState]:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    broker_state = BrokerState(config)
    broker_state.startup()
    broker_state.logs.create_topic("t", 2, {})
    try:
        yield broker_state
    finally:
        broker_state.cleaner.shutdown()  # before the logs close under it (as the app does): no thread left
        broker_state.logs.shutdown()


def _batch(n: int = 2, producer_id: int = -1, epoch: int = -1, sequence: int = -1) -> tuple[bytearray, list[Any]]:
    batch = bytearray(build_batch([Record(i, 0, b"k", b"v") for i in range(n)], base_timestamp=int(time.time() * 1000),
                                  producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence))
    return batch, [(0, parse_header(batch, 0))]


def _partition(state: BrokerState, index: int = 0) -> Partition:
    found, code = state.replicas.resolve("t", index)
    assert found is not None, code
    return found


async def test_append_wakes_watchers_and_acks_one_is_complete_at_once(state: BrokerState) -> None:
    watcher = Flag()
    state.purgatory.watch(watcher, [("t", 0)])
    appended = _partition(state).append(*_batch(3), acks=1, now_ms=0, record_count=3)
    assert appended.done and appended.value.error is ErrorCode.NONE
    assert (appended.value.base_offset, appended.value.last_offset) == (0, 2)
    assert watcher.checks == 1  # the append woke the partition's watcher
    assert state.traffic.snapshot(["t"])["t"].messages_in == 3  # a client's produce counts in the metrics


async def test_acks_one_data_is_fsynced_within_the_window_and_counted(state: BrokerState) -> None:
    """The acks=1 window: the append answers at once, and the flush window fsyncs it within flush.ms."""
    state.logs.alter_topic_configs("t", {"flush.ms": "20"})
    partition = _partition(state)
    appended = partition.append(*_batch(3), acks=1, now_ms=0)
    assert appended.done and appended.value.error is ErrorCode.NONE
    window = state.logs.flush_window
    assert window is not None
    await until(lambda: partition.log.recovery_point == 3, "the acks=1 records fsynced by the window")
    assert window.flushes >= 1 and window.rounds >= 1


async def test_acks_all_completes_only_after_the_fsync(state: BrokerState, monkeypatch: pytest.MonkeyPatch) -> None:
    held = asyncio.Event()
    release = asyncio.get_running_loop().create_future()
    real_sync = Flusher._sync
    loop = asyncio.get_running_loop()

    def slow_sync(log: Log, up_to: int) -> int:
        loop.call_soon_threadsafe(held.set)
        asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(release), 5), loop).result()
        return real_sync(log, up_to)

    monkeypatch.setattr(Flusher, "_sync", staticmethod(slow_sync))
    partition = _partition(state)
    appended = partition.append(*_batch(2), acks=ACKS_ALL, now_ms=0)
    assert appended.outcome.base_offset == 0  # the offsets are known before the fsync
    await asyncio.wait_for(held.wait(), 5)
    assert not appended.done and partition.log.recovery_point == 0
    release.set_result(None)
    outcome = await asyncio.wait_for(appended, 5)
    assert outcome.error is ErrorCode.NONE and partition.log.recovery_point >= 2


async def test_refusals_are_codes_not_exceptions(state: BrokerState) -> None:
    partition = _partition(state, 1)
    assert partition.append(*_batch(1, producer_id=7, epoch=0, sequence=0), acks=1, now_ms=0).value.error is ErrorCode.NONE
    out_of_order = partition.append(*_batch(1, producer_id=7, epoch=0, sequence=5), acks=ACKS_ALL, now_ms=0)
    assert out_of_order.done and out_of_order.value.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    fenced = partition.append_marker(7, -5, 0, True, now_ms=0)
    assert fenced.done and fenced.value.error is not ErrorCode.NONE
    stale = _partition(state, 0)
    state.logs.delete_topic("t")  # the call's log is gone meanwhile
    gone = stale.append(*_batch(1), acks=1, now_ms=0)
    assert gone.value.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert state.replicas.resolve("t", 0) == (None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


async def test_an_append_that_finds_its_log_moved_follows_it_to_the_new_log(state: BrokerState,
                                                                            tmp_path: Path) -> None:
    stale, stale_marker = _partition(state, 0), _partition(state, 0)
    old = stale.log
    # what a move to another log dir publishes: a new Log of the partition (here empty, in another dir)
    elsewhere = tmp_path / "elsewhere"
    moved = Log(elsewhere / "t-0", "t", 0, old.topic_id, old.config, clean=True, clock_ms=state.clock_ms)
    state.logs.replace_log(("t", 0), old, moved, old.dir.parent)
    old.close_moved()
    appended = stale.append(*_batch(2), acks=ACKS_ALL, now_ms=0)  # nothing written to the closed log
    assert (await asyncio.wait_for(appended, 5)).error is ErrorCode.NONE
    assert stale.log is moved and moved.high_watermark == 2
    marker = stale_marker.append_marker(9, 0, 0, False, now_ms=0)
    assert (await asyncio.wait_for(marker, 5)).error is ErrorCode.NONE and moved.high_watermark == 3
    # (a deletion leaves nothing to follow: test_refusals_are_codes_not_exceptions)


async def test_wait_for_compares_positions_and_times_out(state: BrokerState) -> None:
    partition = _partition(state)
    reached = partition.wait_for(2, timeout_s=5)
    assert not reached.done
    partition.append(*_batch(1), acks=1, now_ms=0)
    assert not reached.done  # high watermark 1: not there yet
    _partition(state).append(*_batch(1), acks=1, now_ms=0)
    assert await asyncio.wait_for(reached, 1) is True
    assert _partition(state).wait_for(1, timeout_s=5).done  # already there: complete at once
    assert await asyncio.wait_for(_partition(state).wait_for(99, timeout_s=0.01), 2) is False


async def test_coordinators_get_only_partitions_config_and_clock(state: BrokerState) -> None:
    io = CoordinatorPartitions(state.config, state.clock_ms, state.replicas, detached=state.detached)
    assert io.topic("t") is not None and io.topic("nope") is None
    assert io.partition_exists("t", 1) and not io.partition_exists("t", 2)
    assert io.log_for_replay("t", 0) is state.logs.get_log("t", 0)
    target, code = io.resolve("t", 0)
    assert target is not None and code is ErrorCode.NONE
    assert await target.append(*_batch(1), acks=ACKS_ALL, now_ms=0) is not None
    assert not hasattr(state.groups, "state")  # the group service holds no broker state


async def test_a_long_poll_woken_without_movement_reads_nothing(client: RawClient, app: BrokerApp,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert (await client.call(_produce("still", 1), 9)).responses[0].partition_responses[0].error_code == 0
    reads: list[int] = []
    real_read = Log.read

    def counting_read(self: Log, *args: Any, **kwargs: Any) -> Any:
        reads.append(self.partition)
        return real_read(self, *args, **kwargs)

    monkeypatch.setattr(Log, "read", counting_read)
    await client.send(FetchRequest(max_wait_ms=30_000, min_bytes=1, max_bytes=1 << 20, topics=[
        FetchTopic(topic="still", topic_id=uuid.UUID(int=0),
                   partitions=[FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])]), 12)
    await until(lambda: len(app.state.purgatory) == 1, "the fetch was never parked")
    assert reads == [0]
    for _ in range(5):
        app.state.replicas.notify(("still", 0))  # nothing moved: positions compared, nothing read
    assert reads == [0] and len(app.state.purgatory) == 1
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    producer = RawClient(reader, writer)
    await producer.call(_produce("still", 1), 9)
    producer.close()
    fetched = await client.receive(1, 12, timeout=5)
    assert fetched.responses[0].partitions[0].high_watermark == 2 and reads == [0, 0]


async def test_a_long_poll_of_a_closed_connection_is_forgotten(client: RawClient, app: BrokerApp) -> None:
    await client.call(_produce("gone", 1), 9)
    await client.send(FetchRequest(max_wait_ms=0x7FFFFFFF, min_bytes=1, max_bytes=1 << 20, topics=[
        FetchTopic(topic="gone", topic_id=uuid.UUID(int=0),
                   partitions=[FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])]), 12)
    await until(lambda: len(app.state.purgatory) == 1, "the fetch was never parked")
    client.close()
    # not kept for the 24 days the client asked to wait
    await until(lambda: len(app.state.purgatory) == 0, "the closed connection's long poll stayed")


def _produce(topic: str, n: int) -> ProduceRequest:
    records = build_batch([Record(i, 0, b"k", b"v") for i in range(n)], base_timestamp=int(time.time() * 1000))
    return ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])])
