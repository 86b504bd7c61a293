"""The coordinator runtime groups and transactions share: loading, timers and stopping, against fakes.

The real coordinators run on it in their own tests (and the integration tests restart brokers); these pin
what the runtime itself promises: it follows an existing topic's partition count, replays the partitions
in order (a partition with no log is installed empty, one that cannot be read stays loading), runs its
periodic duties and its deadline timer, re-arms when a deadline moves earlier, and stops cleanly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from pybroker.broker.coordinator.runtime import CoordinatorRuntime, Deadlines, Periodic, Replay


class FakeState:
    def __init__(self) -> None:
        self._loading: set[int] = set()
        self.installed: list[tuple[int, Any]] = []

    @property
    def loading(self) -> set[int]:
        return self._loading

    def begin_loading(self, partitions: Iterable[int]) -> None:
        self._loading.update(partitions)

    def install(self, partition: int, replayed: list[str] | None) -> int:
        self.installed.append((partition, replayed))
        self._loading.discard(partition)
        return len(replayed or [])


def _topic(existing: int | None, logs: dict[int, Any], configured: int = 2) -> Any:
    partitions = SimpleNamespace(
        topic=lambda name: None if existing is None else SimpleNamespace(num_partitions=existing),
        log_for_replay=lambda name, partition: logs.get(partition))
    return SimpleNamespace(name="__state", num_partitions=configured, partitions=partitions)


def _read(log: Any) -> list[str]:
    if log == "broken":
        raise OSError("unreadable")
    return list(log)


async def test_loading_follows_the_existing_topic_and_installs_each_partition_in_order() -> None:
    state = FakeState()
    counts: list[int] = []
    topic = _topic(existing=4, logs={0: ["a", "b"], 2: "broken", 3: ["c"]})
    runtime = CoordinatorRuntime("test coordinator", topic, state, Replay(_read, len), clock_ms=lambda: 0,
                                 on_partition_count=counts.append)
    runtime.start()
    for _ in range(100):
        if len(state.installed) == 3:
            break
        await asyncio.sleep(0.01)
    assert counts == [4] and topic.num_partitions == 4
    assert state.installed == [(0, ["a", "b"]), (1, None), (3, ["c"])]
    assert state.loading == {2}  # unreadable: its keys keep getting a retriable code
    await runtime.stop(lambda: None)


async def test_no_topic_means_nothing_to_load() -> None:
    state = FakeState()
    runtime = CoordinatorRuntime("test coordinator", _topic(existing=None, logs={}), state, Replay(_read, len),
                                 clock_ms=lambda: 0)
    runtime.start()
    await asyncio.sleep(0.02)
    assert state.installed == [] and state.loading == set()
    await runtime.stop(lambda: None)


async def test_periodic_duties_and_deadlines_run_and_an_earlier_deadline_rearms_the_timer() -> None:
    now = [1_000]
    ran: list[str] = []
    deadline: list[int | None] = [None]

    async def async_duty(_now: int) -> None:
        ran.append("async")

    def tick(at: int) -> None:
        if deadline[0] is not None and at >= deadline[0]:
            ran.append("deadline")
            deadline[0] = None

    runtime = CoordinatorRuntime(
        "test coordinator", _topic(existing=None, logs={}), FakeState(), Replay(_read, len),
        clock_ms=lambda: now[0],
        periodic=[Periodic(0.01, lambda _now: ran.append("sync")), Periodic(0.01, async_duty)],
        deadlines=Deadlines(tick, lambda: deadline[0]))
    runtime.start()
    for _ in range(100):
        if "sync" in ran and "async" in ran:
            break
        await asyncio.sleep(0.01)
    assert "sync" in ran and "async" in ran
    deadline[0] = now[0]  # due at once: the sleeping timer hears of it
    runtime.earlier_deadline(now[0])
    for _ in range(100):
        if "deadline" in ran:
            break
        await asyncio.sleep(0.01)
    assert "deadline" in ran
    await runtime.stop(lambda: None)


async def test_stop_runs_the_shutdown_then_ends_the_tasks() -> None:
    stopped: list[str] = []

    async def shutdown() -> None:
        stopped.append("shutdown")

    runtime = CoordinatorRuntime("test coordinator", _topic(existing=None, logs={}), FakeState(),
                                 Replay(_read, len), clock_ms=lambda: 0, periodic=[Periodic(3600, lambda _now: None)])
    runtime.start()
    await runtime.stop(shutdown)
    assert stopped == ["shutdown"]
    assert all(task.done() for task in runtime._tasks)
