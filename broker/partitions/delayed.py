"""The one deferred-response primitive: an operation that completes when its check holds or its deadline passes.

Kafka's `DelayedOperation` in our terms. A request whose answer must wait (acks=all for the fsync, a fetch
long-poll for data, an offsets-topic commit or a transaction marker for durability) builds one, and whoever
learns that something changed calls `try_complete`: the flusher's answer on the loop, an append on a
partition the operation watches (`purgatory.Purgatory`), the deadline's timer. `ready` is the completion
check (cheap: compare positions, count outstanding fsyncs), `answer` builds the result once, exactly once.

An operation is awaitable, and costs no asyncio future unless someone awaits it before it completes: an
acks=1 append or a refused one is complete when it is made, and its caller reads `value` at once. Others
may ask to be called back (`on_done`) instead of awaiting; `all_of` makes one operation of many (a produce
over many partitions, markers over a transaction's partitions) with no task or `gather` per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
R = TypeVar("R")


class DelayedOperation(Generic[T]):
    """Subclasses define `ready` (the completion check) and `answer` (the result, built once)."""

    __slots__ = ("_callbacks", "_done", "_error", "_future", "_timer", "_value", "watching")

    def __init__(self) -> None:
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._future: asyncio.Future[T] | None = None
        self._callbacks: list[Callable[[DelayedOperation[T]], None]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        #: the keys a purgatory watches this operation under (set and cleared by the purgatory)
        self.watching: tuple[Any, ...] = ()

    # -- what a kind of operation defines ------------------------------------------------------------
    def ready(self) -> bool:
        """Can it complete now? Called on every wake: keep it cheap."""
        return False

    def answer(self) -> T:
        """The result, built once when the operation completes (ready, or expired)."""
        raise NotImplementedError

    def wake(self, key: Any) -> None:
        """A purgatory's call: `key`, which this operation watches, changed. An operation that can tell
        from the key alone that nothing it waits for moved overrides this to skip its check."""
        self.try_complete()

    # -- completing ----------------------------------------------------------------------------------
    def try_complete(self) -> bool:
        """Complete if the check holds; True when the operation is (now or already) complete."""
        if self._done:
            return True
        try:
            if not self.ready():
                return False
        except Exception as exc:  # the waiter gets it, not whoever happened to wake the operation
            self.force_complete(exc)
            return True
        self.force_complete()
        return True

    def force_complete(self, error: Exception | None = None) -> None:
        """Complete now, whatever the check says: the deadline passed, or the broker is stopping (with
        `error`: the check failed, and the waiter gets that instead of an answer)."""
        if self._done:
            return
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if error is not None:
            self._error = error
        else:
            try:
                self._value = self.answer()
            except Exception as exc:  # the waiter gets it, not whoever happened to wake the operation
                self._error = exc
        future = self._future
        if future is not None and not future.done():
            if self._error is not None:
                future.set_exception(self._error)
            else:
                future.set_result(self._value)  # type: ignore[arg-type]
        callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for callback in callbacks:
                callback(self)

    def expire_after(self, seconds: float) -> None:
        """Force completion at a deadline, unless it completes first (one timer, cancelled then)."""
        if not self._done:
            self._timer = asyncio.get_running_loop().call_later(max(seconds, 0.0), self.force_complete)

    # -- reading the outcome -------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._done

    @property
    def value(self) -> T:
        """The result of a completed operation (raises what `answer` raised)."""
        if not self._done:
            raise RuntimeError("the operation has not completed")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def on_done(self, callback: Callable[[DelayedOperation[T]], None]) -> None:
        """`callback(self)` once complete: at once if it already is."""
        if self._done:
            callback(self)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def future(self) -> asyncio.Future[T]:
        """An asyncio future of the result (what `dispatch.waiting` is best given: the connection then
        needs no task to wait on it). Cancelling it abandons the operation (`abandon`)."""
        if self._future is None:
            future = self._future = asyncio.get_running_loop().create_future()
            if not self._done:
                future.add_done_callback(self._future_done)
            elif self._error is not None:
                future.set_exception(self._error)
            else:
                future.set_result(self._value)
        return self._future

    def _future_done(self, future: asyncio.Future[T]) -> None:
        if future.cancelled():
            self.abandon()

    def abandon(self) -> None:
        """Nobody waits for the answer any more (its connection closed, its task was cancelled): stop the
        timer and leave the purgatory now, not at the deadline a client chose, and build no answer."""
        if self._done:
            return
        self._done = True
        self._error = asyncio.CancelledError()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for callback in callbacks:
                callback(self)

    def __await__(self) -> Generator[Any, None, T]:
        if not self._done:
            return (yield from self.future().__await__())
        return self.value


class Completed(DelayedOperation[T]):
    """An operation complete from the start (a refused append, one that waits for nothing)."""

    __slots__ = ()

    def __init__(self, value: T) -> None:
        super().__init__()
        self._done = True
        self._value = value


class AllOf(DelayedOperation[R], Generic[T, R]):
    """Complete once every part is, with `then(the parts' results)`: one wait for a request over many
    partitions."""

    __slots__ = ("_parts", "_pending", "_then")

    def __init__(self, parts: list[DelayedOperation[T]], then: Callable[[list[T]], R]) -> None:
        super().__init__()
        self._parts = parts
        self._then = then
        self._pending = 0
        for part in parts:
            if not part.done:
                self._pending += 1
                part.on_done(self._part_done)

    def _part_done(self, _part: DelayedOperation[Any]) -> None:
        self._pending -= 1
        self.try_complete()

    def ready(self) -> bool:
        return self._pending == 0

    def answer(self) -> R:
        return self._then([part.value for part in self._parts])


def _as_list(values: list[T]) -> list[T]:
    return values


@overload
def all_of(parts: list[DelayedOperation[T]]) -> DelayedOperation[list[T]]: ...
@overload
def all_of(parts: list[DelayedOperation[T]], then: Callable[[list[T]], R]) -> DelayedOperation[R]: ...


def all_of(parts: list[DelayedOperation[T]], then: Callable[[list[T]], Any] = _as_list) -> DelayedOperation[Any]:
    """One operation over `parts`, complete once all are (at once when they all are), whose result is
    `then(their results in order)` (default: the list itself)."""
    combined: AllOf[T, Any] = AllOf(parts, then)
    combined.try_complete()
    return combined
