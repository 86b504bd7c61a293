"""Moving a partition between log dirs, online and crash-safe (AlterReplicaLogDirs; Kafka's future replicas).

A move copies the partition into a "future" log in the target dir, `<topic>-<partition>.<uuid>-future`,
while the current log keeps taking appends and serving reads: batches are read from the current log from
its start and appended to the future with their offsets kept (Kafka's ReplicaAlterLogDirsThread), in
chunks, throttled by `replica.alter.log.dirs.io.max.bytes.per.second`, on ONE mover thread: moves run one
after another, so a request naming thousands of partitions holds one future log open, not thousands, and
the copy costs the event loop at most one thread's share of the interpreter. Once less than a chunk is
left in the current log's active segment, the cleaner is held off the partition (`hold_cleaning`: a clean
writing into the old dir as it is renamed away would take the dir offline), the copy is fsynced, and the
swap runs with the current log paused (`Log.paused`: its appends, flushes, retention and cleaner swaps wait
a few milliseconds):

1. the rest is copied; the current log's producer state is written into the future as its snapshot; the
   future is closed (fsynced) and the target dir's checkpoints are written with its recovery point and
   log start offset;
2. the current dir is renamed `<topic>-<partition>.<uuid>-delete` (its parent fsynced);
3. the future dir is renamed `<topic>-<partition>` (its parent fsynced) and opened;
4. `LogManager.replace_log` publishes the new log in place of the old one (handlers look the log up as
   before); the old log is closed with every offset counted durable (`Log.close_moved`: a waiter for its
   fsync is answered at once, reads already handed out keep its open files) and its dir removed.

An append that looked the old log up before the swap and waited on the pause gets `LogClosedError` with
nothing written; the broker's partition layer (`Partition.append`, `append_marker`) then looks the
partition up again and appends to the moved log. Crash safety is the startup rule (`settle_future_dirs`):
a `-future` dir is promoted to its partition's dir only when it is marked complete (`future-of.complete`,
renamed into place at the end of step 1) and no dir of the partition is left (a crash between steps 2 and
3); otherwise it is an unfinished copy, or one whose swap had not begun, and is deleted (the move is
forgotten: ask again).
`-delete` dirs are removed at startup, as for deleted topics.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from pybroker.protocol.records.batch import parse_header
from pybroker.storage.checkpoints import LOG_START_OFFSET, RECOVERY_POINT, write_checkpoint
from pybroker.storage.cleaner.throttle import UNLIMITED, Throttler
from pybroker.storage.dir_names import renamed_dir_name
from pybroker.storage.errors import (
    LogClosedError,
    LogDirNotFoundError,
    LogDirOfflineError,
    OffsetOutOfRange,
    UnknownTopicError,
)
from pybroker.storage.files import atomic_write, fsync_dir
from pybroker.storage.log import DELETE_SUFFIX, Log
from pybroker.storage.topic_store import write_partition_metadata

if TYPE_CHECKING:
    from pybroker.storage.log_manager import LogManager

log = structlog.get_logger("pybroker.storage.log_mover")

FUTURE_SUFFIX = "-future"
#: in a future dir: the name of the partition dir it becomes (the future's own name may cut the topic short)
FUTURE_OF = "future-of"
#: `future-of` renamed once the copy is complete and fsynced, just before the swap's renames: only a future
#: holding it may ever be promoted at startup (a copy without it is unfinished, whatever else is on disk)
FUTURE_COMPLETE = "future-of.complete"
#: bytes copied per read; the loop gets the interpreter back between chunks
CHUNK_BYTES = 1 << 20
#: how often the copy rate is measured: a copy from the page cache runs at GB/s, so a longer period would
#: let a whole partition through before the first check
THROTTLE_CHECK_S = 0.01
Key = tuple[str, int]


@dataclass(eq=False, slots=True)
class Move:
    topic: str
    partition: int
    target: Path
    cancelled: bool = False
    #: once the swap began it runs to its end (a new request for the partition queues behind it)
    swapping: bool = False
    future: Log | None = None


@dataclass(frozen=True, slots=True)
class FutureReplica:
    """What DescribeLogDirs shows of a move: the future's dir, size, and how far it is behind."""

    topic: str
    partition: int
    log_dir: Path
    size: int
    offset_lag: int


class LogDirMover:
    def __init__(self, manager: LogManager, *, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.manager = manager
        self.chunk_bytes = chunk_bytes
        #: set by `stop`: also ends a throttled pause at once
        self._stopped = threading.Event()
        self.throttler = Throttler(UNLIMITED, sleep=self._pause, check_interval_s=THROTTLE_CHECK_S)
        #: bytes of the active segment after the last chunk copied (None: the copy is in an older segment)
        self._lag_bytes: int | None = None
        #: the move being copied (its cancellation also ends a throttled pause)
        self._current: tuple[Move, Log] | None = None
        self._cond = threading.Condition()
        self._moves: dict[Key, Move] = {}
        #: moves not started yet, oldest first (a dict: a replaced one leaves it at once, so a client asking
        #: again and again queues at most one move per partition)
        self._queue: dict[Key, Move] = {}
        self._thread: threading.Thread | None = None
        self._stopping = False
        #: moves that ended with the swap (for tests and metrics)
        self.completed = 0
        #: keeps the cleaner off a partition while it is swapped (the broker sets the cleaner's `held_off`):
        #: a clean writing into the old dir as it is renamed away would take that dir offline
        self.hold_cleaning: Callable[[Key], contextlib.AbstractContextManager[bool]] = \
            lambda key: contextlib.nullcontext(True)

    # -- requests (any thread) -----------------------------------------------------------------------
    def move(self, topic: str, partition: int, path: str) -> None:
        """AlterReplicaLogDirs for one partition: start moving it to the configured log dir `path` (an
        absolute path, compared as Kafka does; any other path is refused). Raises `LogDirNotFoundError`,
        `LogDirOfflineError` or `UnknownTopicError`; a partition already there changes nothing."""
        manager = self.manager
        target = next((d for d in manager.dirs if os.path.isabs(path) and os.path.normpath(path) == str(d)), None)
        if target is None:
            raise LogDirNotFoundError(f"Log dir {path} is not one of this broker's log dirs")
        if not manager.failures.is_online(target):
            raise LogDirOfflineError(f"Log dir {path} is offline")
        current = manager.dir_of(topic, partition)
        if current is None or manager.get_log(topic, partition) is None:
            raise UnknownTopicError(f"Partition {topic}-{partition} does not exist on this broker")
        if not manager.failures.is_online(current):
            raise LogDirOfflineError(f"The log dir of {topic}-{partition} is offline")
        self.request(topic, partition, target, current)

    def request(self, topic: str, partition: int, target: Path, current_dir: Path) -> None:
        """Move the partition to `target` (checked by the manager). One move per partition: asking again
        for the same dir changes nothing; for another dir the running copy is dropped for the new one
        (Kafka's rule); for the dir it is in, a running copy is dropped and nothing moves."""
        key = (topic, partition)
        with self._cond:
            if self._stopping:
                return
            running = self._moves.get(key)
            if running is not None:
                if running.target == target:
                    return
                if not running.swapping:
                    running.cancelled = True
                    del self._moves[key]
                    self._queue.pop(key, None)
                    if target == current_dir:
                        return
            elif target == current_dir:
                return
            move = Move(topic, partition, target)
            self._moves[key] = move
            self._queue[key] = move
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="log-dir-mover", daemon=True)
                self._thread.start()
            self._cond.notify()

    def futures(self) -> list[FutureReplica]:
        """The moves asked for and not yet done (a queued move has no copy yet: size 0)."""
        with self._cond:
            moves = list(self._moves.values())
        found = []
        for move in moves:
            if self.manager.dir_of(move.topic, move.partition) == move.target:
                continue  # swapped in a moment ago: the current replica now
            current = self.manager.get_log(move.topic, move.partition)
            end = current.log_end_offset if current is not None else 0
            future = move.future
            size, copied = (future.size_bytes, future.log_end_offset) if future is not None else (0, 0)
            found.append(FutureReplica(move.topic, move.partition, move.target, size, max(end - copied, 0)))
        return found

    @property
    def busy(self) -> bool:
        """A move is queued or under way (its old dir's removal included)."""
        with self._cond:
            return bool(self._moves)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop at the next chunk (a swap under way finishes); the unfinished copy is removed."""
        with self._cond:
            self._stopping = True
            self._stopped.set()
            for move in self._moves.values():
                move.cancelled = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    # -- the mover thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                move = self._queue.pop(next(iter(self._queue)))
            try:
                self._carry_out(move)
            except Exception:
                log.exception("log dir move failed", topic=move.topic, partition=move.partition,
                              log_dir=str(move.target))
            finally:
                with self._cond:
                    if self._moves.get((move.topic, move.partition)) is move:
                        del self._moves[(move.topic, move.partition)]

    def _pause(self, seconds: float) -> None:
        """The throttle's sleep, cut short by `stop`, a cancelled move or a deleted partition."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not self._stopped.is_set():
            current = self._current
            if current is not None and (current[0].cancelled or current[1].closed):
                return
            self._stopped.wait(min(left, 0.05))

    def _carry_out(self, move: Move) -> None:
        manager = self.manager
        source = manager.get_log(move.topic, move.partition)
        source_dir = manager.dir_of(move.topic, move.partition)
        info = manager.topics().get(move.topic)
        if move.cancelled or source is None or source_dir is None or info is None or source_dir == move.target:
            return
        live_name = source.dir.name
        path = move.target / renamed_dir_name(live_name, FUTURE_SUFFIX)
        try:
            path.mkdir()
            write_partition_metadata(path, info.topic_id)
            atomic_write(path / FUTURE_OF, os.fsencode(live_name))
            future = Log(path, move.topic, move.partition, info.topic_id, source.config, clock_ms=manager.clock_ms,
                         page_cache=manager.page_cache)
        except OSError as exc:
            manager.failures.report(move.target, exc)
            shutil.rmtree(path, ignore_errors=True)
            return
        move.future = future
        self._current = (move, source)
        # a fresh measuring period: a throttle idle since the last move would let the first period burst
        self.throttler = Throttler(self.throttler.bytes_per_second, sleep=self._pause,
                                   check_interval_s=THROTTLE_CHECK_S)
        swapped = False
        try:
            swapped = self._copy_then_swap(move, source, source_dir, future)
        finally:
            move.future = self._current = None
            if not swapped:
                with contextlib.suppress(Exception):
                    future.abandon()
                shutil.rmtree(path, ignore_errors=True)
        if swapped:
            self.completed += 1
            log.info("partition moved", topic=move.topic, partition=move.partition, from_dir=str(source_dir),
                     to_dir=str(move.target))

    def _copy_then_swap(self, move: Move, source: Log, source_dir: Path, future: Log) -> bool:
        online = self.manager.failures.is_online
        while True:
            if move.cancelled or source.closed or not online(source_dir) or not online(move.target):
                return False
            copied = self._copy_chunk(source, source_dir, future, move.target)
            if copied is None:
                return False
            # caught up, or nearly (less than a chunk left in the active segment): the rest is copied under
            # the pause
            if not copied or (self._lag_bytes is not None and self._lag_bytes < self._chunk(source)):
                with self.hold_cleaning((move.topic, move.partition)) as held:
                    if not held:  # a long clean of it is still running: copy on, try again
                        continue
                    while copied and (self._lag_bytes is None or self._lag_bytes >= self._chunk(source)):
                        copied = self._copy_chunk(source, source_dir, future, move.target)  # what came meanwhile
                    if copied is None or not self._sync(future, move.target):
                        return False
                    with self._cond:
                        if move.cancelled:
                            return False
                        move.swapping = True
                    return self._swap(move, source, source_dir, future)
            self.throttler.maybe_throttle(copied)
            time.sleep(0)  # let the event loop have the interpreter between chunks

    def _sync(self, future: Log, target: Path) -> bool:
        """fsync the copy before the pause, so the swap's own fsync covers only what came since."""
        try:
            future.flush()
        except OSError as exc:
            self.manager.failures.report(target, exc)
            return False
        return True

    def _chunk(self, source: Log) -> int:
        """Bytes per read: a chunk, at most a segment (the future's segments come out the source's size)."""
        return max(min(self.chunk_bytes, source.config.segment_bytes), 1)

    def _copy_chunk(self, source: Log, source_dir: Path, future: Log, target: Path) -> int | None:
        """Copy the batches after the future's end (at most a chunk); bytes copied, None on an I/O error."""
        manager = self.manager
        try:
            position = future.log_end_offset
            if position < source.log_start_offset or (not future.size_bytes and position != source.log_start_offset):
                future.restart_at(source.log_start_offset)  # retention or DeleteRecords moved the start
                position = source.log_start_offset
            elif position > source.log_end_offset:
                future.truncate_to(source.log_end_offset)
                return 0
        except OSError as exc:
            manager.failures.report(target, exc)
            return None
        self._lag_bytes = None
        try:
            region = source.read(position, self._chunk(source), max_offset=source.log_end_offset).region
            data = region.read_bytes() if region is not None else b""
            active = source.active_segment
            if region is not None and region.file is active.file:  # bytes left behind it in the active segment
                self._lag_bytes = active.size - region.position - region.length
        except OffsetOutOfRange:
            return self._chunk(source)  # the start moved meanwhile: the next round restarts there
        except LogClosedError:
            return None
        except OSError as exc:
            manager.report_io_error(source, exc)
            return None
        if not data:
            return 0
        batches = []
        pos = 0
        while pos < len(data):
            header = parse_header(data, pos)
            batches.append((pos, header))
            pos += header.size
        try:
            future.append_copied(data, batches, now_ms=manager.clock_ms())
        except OSError as exc:
            manager.failures.report(target, exc)
            return None
        return len(data)

    def _swap(self, move: Move, source: Log, source_dir: Path, future: Log) -> bool:
        """Steps 1-4 of the module docstring, with the source paused."""
        manager = self.manager
        key = (move.topic, move.partition)
        target = move.target
        live = target / source.dir.name
        with manager.checkpoint_lock, source.paused(), manager.mutation_lock:
            if source.closed or manager.get_log(*key) is not source or not manager.running:
                return False  # deleted, or the broker is stopping
            while True:  # the rest: appends wait meanwhile
                copied = self._copy_chunk(source, source_dir, future, target)
                if copied is None:
                    return False
                if not copied:
                    break
            end, start = source.log_end_offset, max(future.log_start_offset, source.log_start_offset)
            if future.log_end_offset != end:  # never swap in a log whose next offset differs: offsets would repeat
                log.warning("log dir move dropped: the copy did not reach the log end", topic=move.topic,
                            partition=move.partition, copied_to=future.log_end_offset, log_end=end)
                return False
            try:
                future.flush()  # what the pause copied: `close` syncs no log data, and the source goes next
                future.log_start_offset = start
                source.producer_state.snapshot_into(future.dir, end)
                future.close()
                _checkpoint_with(manager, target, key, end, start)
                os.rename(future.dir / FUTURE_OF, future.dir / FUTURE_COMPLETE)
                fsync_dir(future.dir)
            except OSError as exc:
                manager.failures.report(target, exc)
                return False
            doomed = source.dir.with_name(renamed_dir_name(source.dir.name, DELETE_SUFFIX))
            try:
                os.rename(source.dir, doomed)
                fsync_dir(source_dir)
            except OSError as exc:
                manager.report_io_error(source, exc)
                return False
            try:
                os.rename(future.dir, live)
                fsync_dir(target)
                (live / FUTURE_COMPLETE).unlink(missing_ok=True)
                moved = Log(live, move.topic, move.partition, source.topic_id, source.config,
                            recovery_point=end, log_start_offset=start, clean=True, clock_ms=manager.clock_ms,
                            page_cache=manager.page_cache)
            except OSError as exc:  # the future is complete: a restart promotes it; until then, none is served
                manager.failures.report(target, exc)
                source.close_moved()
                return False
            manager.replace_log(key, source, moved, target)
            source.close_moved()
        shutil.rmtree(doomed, ignore_errors=True)
        return True


def _checkpoint_with(manager: LogManager, directory: Path, key: Key, recovery_point: int, log_start: int) -> None:
    """The dir's checkpoints with the future's entry added (before the renames, so a restart that promotes
    the future finds its recovery point and log start offset: DeleteRecords never comes undone)."""
    mine = [lg for lg in manager.logs() if manager.dir_of(lg.topic, lg.partition) == directory]
    write_checkpoint(directory / RECOVERY_POINT,
                     {**{(lg.topic, lg.partition): lg.recovery_point for lg in mine}, key: recovery_point})
    write_checkpoint(directory / LOG_START_OFFSET,
                     {**{(lg.topic, lg.partition): lg.log_start_offset for lg in mine}, key: log_start})


def settle_future_dirs(dirs: list[Path], is_live: Callable[[str], bool]) -> list[tuple[str, str]]:
    """At startup, before any partition dir is opened: promote or delete each `-future` dir (module
    docstring). `is_live(name)` says whether a name is a partition dir's. Returns (future dir, verdict)."""
    live = {child.name for d in dirs for child in _children(d) if child.is_dir() and is_live(child.name)}
    verdicts = []
    for directory in dirs:
        for child in _children(directory):
            if not (child.is_dir() and child.name.endswith(FUTURE_SUFFIX)):
                continue
            name = _live_name(child)
            if name is None or name in live:  # unfinished, or the swap had not begun: the partition is whole
                shutil.rmtree(child, ignore_errors=True)
                verdicts.append((str(child), "dropped"))
            else:
                os.rename(child, directory / name)
                fsync_dir(directory)
                (directory / name / FUTURE_COMPLETE).unlink(missing_ok=True)
                live.add(name)
                verdicts.append((str(child), "promoted"))
            log.info("log dir move settled", future_dir=verdicts[-1][0], verdict=verdicts[-1][1])
    return verdicts


def _children(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def _live_name(future_dir: Path) -> str | None:
    """The partition dir a complete future becomes (its `future-of.complete`); None for an unfinished one."""
    try:
        return os.fsdecode((future_dir / FUTURE_COMPLETE).read_bytes()) or None
    except OSError:
        return None
