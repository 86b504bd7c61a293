"""The life of a coordinator backed by an internal compacted topic: loading at startup, timers, shutdown.

The group coordinator (`__consumer_offsets`) and the transaction coordinator (`__transaction_state`) live the
same life, and the share-group coordinator (KIP-932, `__share_group_state`) will too; this is that life,
written once. A coordinator plugs in as a `LoadedState` (what to do with one replayed partition) and hands
the runtime its duties no request triggers: `Periodic` duties every so often, and optionally a deadline
timer (`Deadlines`: the state says when it next has something to do and is told when that moved earlier).
Writes (write-then-answer, fsynced) are the topic's: `internal_topic.InternalTopic.write_batch`.

- `start()`: if the topic exists, its partition count is followed (the records are where the existing topic
  put them), every partition is marked loading (requests for its keys get a retriable code until it is in),
  and a task replays the partitions one by one, each in a thread, handing each result to the state.
- the timer task sleeps until the next periodic duty or deadline (an idle broker stays idle: no polling),
  then runs what is due. A failing duty is logged, never fatal.
- `stop(shutdown)`: the timer stops, the state's `shutdown` answers what is waiting, the tasks are cancelled.

Threads: everything here runs on the event loop's thread, except the `replay` function, which runs in a
worker thread for the length of one partition's read and touches nothing but that partition's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pybroker.broker.loggers.structlog_setup import get_logger

if TYPE_CHECKING:
    from pybroker.broker.coordinator.internal_topic import InternalTopic
    from pybroker.storage.log import Log

#: a timer that fires a hair early (clock granularity) looks again after this long
MIN_WAIT_S = 0.001

R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)


class LoadedState(Protocol[R_contra]):
    """What a coordinator's state offers the runtime's loading."""

    @property
    def loading(self) -> set[int]:
        """The topic's partitions still being read back (their keys get a retriable code meanwhile)."""
        ...

    def begin_loading(self, partitions: Iterable[int]) -> None: ...

    def install(self, partition: int, replayed: R_contra | None) -> int:
        """Take what replaying one partition found (None: the partition has no log); its keys are then
        served. Returns how many keys (groups, transactional ids) it brought."""
        ...


@dataclass(frozen=True, slots=True)
class Periodic:
    """A duty run every `interval_s` seconds with the clock's `now` (a coroutine's result is awaited)."""

    interval_s: float
    run: Callable[[int], Awaitable[object] | None]


@dataclass(frozen=True, slots=True)
class Deadlines:
    """A state's own timer: `tick(now)` acts on what is due; `next_deadline()` says when next (None: nothing)."""

    tick: Callable[[int], None]
    next_deadline: Callable[[], int | None]


@dataclass(frozen=True, slots=True)
class Replay(Generic[R]):
    """How a partition is read back: a blocking `read(log)` run in a thread, and how many records it found."""

    read: Callable[[Log], R]
    records: Callable[[R], int]


class CoordinatorRuntime(Generic[R]):
    def __init__(self, name: str, topic: InternalTopic, state: LoadedState[R], replay: Replay[R], *,
                 clock_ms: Callable[[], int], periodic: Iterable[Periodic] = (), deadlines: Deadlines | None = None,
                 on_partition_count: Callable[[int], None] | None = None, logger: str = "pybroker.coordinator",
                 loaded_key: str = "keys") -> None:
        #: "group coordinator", "transaction coordinator": how the logs name it
        self.name = name
        self.topic = topic
        self.state = state
        self.replay = replay
        self.clock_ms = clock_ms
        self.periodic = tuple(periodic)
        self.deadlines = deadlines
        #: told the existing topic's partition count when it differs from the configured one
        self.on_partition_count = on_partition_count
        self._log = get_logger(logger)
        self._loaded_key = loaded_key
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        #: set when the state schedules a deadline earlier than the one the timer waits for
        self._rearm = asyncio.Event()

    def earlier_deadline(self, _deadline: int | None = None) -> None:
        """The state's hook: a deadline earlier than every other was scheduled (the timer re-arms)."""
        self._rearm.set()

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Begin loading the topic (requests for its keys wait until their partition is in), and the timer."""
        info = self.topic.partitions.topic(self.topic.name)
        if info is not None and info.num_partitions != self.topic.num_partitions:
            # the records are where the existing topic put them: follow its partition count
            self.topic.num_partitions = info.num_partitions
            if self.on_partition_count is not None:
                self.on_partition_count(info.num_partitions)
        if info is not None:
            self.state.begin_loading(range(info.num_partitions))
        self._tasks = [asyncio.create_task(self._load(info is not None)),
                       asyncio.create_task(self._tick())]

    async def stop(self, shutdown: Callable[[], Awaitable[object] | None]) -> None:
        self._stopping.set()
        await _maybe_await(shutdown())
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- loading --------------------------------------------------------------------------------------
    async def _load(self, exists: bool) -> None:
        if not exists:
            return
        started = time.monotonic()
        keys = records = 0
        for partition in sorted(self.state.loading):
            partition_log = self.topic.partitions.log_for_replay(self.topic.name, partition)
            if partition_log is None:
                self.state.install(partition, None)
                continue
            try:
                replayed = await asyncio.to_thread(self.replay.read, partition_log)
            except Exception as exc:  # a partition we cannot read stays loading: its keys get a retriable code
                self._log.error("cannot load internal topic partition", topic=self.topic.name, partition=partition,
                                error=repr(exc))
                continue
            keys += self.state.install(partition, replayed)
            records += self.replay.records(replayed)
        self._log.info(f"{self.name} loaded", **{self._loaded_key: keys}, records=records,
                       seconds=round(time.monotonic() - started, 3))

    # -- timers ---------------------------------------------------------------------------------------
    async def _tick(self) -> None:
        last_run = [time.monotonic()] * len(self.periodic)
        while not self._stopping.is_set():
            # asleep until the next duty or deadline is due (not a poll every second: an idle broker stays idle)
            wait_s = min((last + duty.interval_s for last, duty in zip(last_run, self.periodic, strict=True)),
                         default=float("inf")) - time.monotonic()
            deadline = self.deadlines.next_deadline() if self.deadlines is not None else None
            if deadline is not None:
                wait_s = min(wait_s, (deadline - self.clock_ms()) / 1000)
            self._rearm.clear()
            if wait_s > 0:
                await self._sleep(max(wait_s, MIN_WAIT_S) if wait_s != float("inf") else None)
            if self._stopping.is_set():
                return
            try:
                now = self.clock_ms()
                if self.deadlines is not None:
                    self.deadlines.tick(now)
                for i, duty in enumerate(self.periodic):
                    if time.monotonic() - last_run[i] >= duty.interval_s:
                        last_run[i] = time.monotonic()
                        await _maybe_await(duty.run(now))
            except Exception:
                self._log.exception(f"{self.name} timer failed")

    async def _sleep(self, seconds: float | None) -> None:
        """Until `seconds` pass (None: forever), the runtime stops, or an earlier deadline is scheduled."""
        waits = {asyncio.ensure_future(self._stopping.wait()), asyncio.ensure_future(self._rearm.wait())}
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()


async def _maybe_await(result: Any) -> None:
    if inspect.isawaitable(result):
        await result
