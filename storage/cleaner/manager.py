"""Running the cleaner: which log next, on which thread, and what happens when anything goes wrong.

Kafka's `LogCleaner` and `LogCleanerManager`, with the failure rules of the Heroku post-mortem built
in: nothing about the cleaner may fail silently.

- Selection: among logs whose cleanup.policy contains `compact`, in an online log dir, not being
  cleaned and not uncleanable, the one with the highest dirty ratio above its min.cleanable.dirty.ratio
  (or overdue by max.compaction.lag.ms); failing that, one whose kept tombstones' delete horizon has
  passed, so they do go. `__consumer_offsets` is a compacted log like any other.
- A clean that raises marks its partition uncleanable: logged at error level with the reason, counted
  in `pybroker_cleaner_uncleanable_partitions`, skipped until the broker restarts. An `OSError` is
  also handed to `on_io_error(log_dir, exc)` (the log-dir failure channel); a dir that
  `is_dir_online` says is offline is no longer cleaned. A log closed or deleted under a clean only
  aborts that clean.
- A batch whose records cannot be decoded is not a failure: the clean keeps it whole and goes on
  (`batch_filter`); the manager logs one warning per clean that met any (partition, first offset,
  reason, how many) and counts them in `pybroker_cleaner_malformed_batches`.
- A cleaner thread that dies anyway (an error outside any one clean) is logged, counted in
  `pybroker_cleaner_dead_threads` and restarted by a supervisor thread.
- Each thread cleans in a worker process of its own (`process_cleaner`, `log.cleaner.process.enable`),
  off the interpreter lock the event loop needs, at a lower priority; the thread waits on the pipe and
  swaps what the worker wrote. A worker that dies mid-clean is logged, counted in
  `pybroker_cleaner_worker_deaths`, and its partition retried after `log.cleaner.backoff.ms`; the third
  death in a row on one partition marks it uncleanable (a log that kills every worker must not loop).
- After each clean the new first dirty offset goes to `cleaner-offset-checkpoint`; shutdown stops the
  threads (and their workers) between batches, and an interrupted clean deletes its unfinished output.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeAlias

import structlog

from pybroker.storage.cleaner.batch_filter import NO_HORIZON
from pybroker.storage.cleaner.checkpoint import CleanerCheckpoints, Partition
from pybroker.storage.cleaner.cleaner import READ_CHUNK, Cleaner, CleaningAborted, CleanResult
from pybroker.storage.cleaner.job import WorkerSettings
from pybroker.storage.cleaner.metrics import (
    BYTES_RECLAIMED,
    CLEANER_RUNS,
    DEAD_THREADS,
    MALFORMED_BATCHES,
    UNCLEANABLE_PARTITIONS,
    WORKER_DEATHS,
)
from pybroker.storage.cleaner.offset_map import DEFAULT_LOAD_FACTOR, OffsetMap
from pybroker.storage.cleaner.process_cleaner import DEFAULT_NICE, ProcessCleaner, WorkerDied
from pybroker.storage.cleaner.selection import DirtySection, dirty_section
from pybroker.storage.cleaner.swap import StepHook, no_hook
from pybroker.storage.cleaner.throttle import UNLIMITED, Throttler
from pybroker.storage.clock import wall_clock_ms
from pybroker.storage.log import Log

log = structlog.get_logger("pybroker.cleaner").bind(logger="pybroker.cleaner")

#: how often the supervisor looks for dead cleaner threads
SUPERVISE_INTERVAL_S = 1.0
#: how long shutdown waits for a thread to leave its clean
JOIN_TIMEOUT_S = 30.0
#: a partition whose clean killed the worker this many times in a row is marked uncleanable
MAX_WORKER_DEATHS = 3
#: how often a move waiting for a clean of its partition to end looks again
HELD_OFF_POLL_S = 0.05

#: what cleans one log: on the thread itself, or in a worker process the thread waits for
LogCleaner: TypeAlias = Cleaner | ProcessCleaner


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """The broker-wide cleaner settings (`log.cleaner.*`)."""

    enabled: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134_217_728
    io_max_bytes_per_second: float = UNLIMITED
    backoff_ms: int = 15_000
    load_factor: float = DEFAULT_LOAD_FACTOR
    #: the interpreter's thread switch interval while cleaner threads run (None: leave it). The cleaner
    #: shares the GIL with the event loop; CPython's default 5 ms means every GIL hand-back a request
    #: needs (recv, send, epoll) can wait 5 ms behind a busy cleaner. 0.5 ms bounds that wait tenfold
    #: lower for a little more switching work (see bench/cleaner_latency.py).
    switch_interval_s: float | None = 0.0005
    #: clean in a worker process (`process_cleaner`), off the broker's interpreter lock; False: on the
    #: cleaner threads themselves (also the fallback when the process cannot start)
    process: bool = True
    #: the niceness the worker process adds to its own, so the event loop wins the CPU
    process_nice: int = DEFAULT_NICE


class LogSource(Protocol):
    """What the manager needs of the log manager."""

    dirs: list[Path]

    def logs(self) -> list[Log]: ...

    def dir_of(self, topic: str, partition: int) -> Path | None: ...


def log_io_error(log_dir: Path, exc: OSError) -> None:
    """The default I/O error handler: say so (the broker wires in its log-dir failure channel)."""
    log.error("cleaner I/O error", log_dir=str(log_dir), error=repr(exc))


def always_online(log_dir: Path) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class _Candidate:
    log: Log
    log_dir: Path
    section: DirtySection


class CleanerManager:
    def __init__(self, logs: LogSource, settings: CleanerSettings, *,
                 clock_ms: Callable[[], int] = wall_clock_ms,
                 on_io_error: Callable[[Path, OSError], object] = log_io_error,  # its result is unused
                 is_dir_online: Callable[[Path], bool] = always_online,
                 swap_hook: StepHook = no_hook) -> None:
        self.logs = logs
        self.settings = settings
        self.clock_ms = clock_ms
        self.on_io_error = on_io_error
        self.is_dir_online = is_dir_online
        self.swap_hook = swap_hook
        self.throttler = Throttler(settings.io_max_bytes_per_second)
        self.checkpoints = CleanerCheckpoints([])
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._in_progress: set[Partition] = set()
        #: log dir -> partition -> why its clean failed
        self._uncleanable: dict[Path, dict[Partition, str]] = {}
        #: partition -> earliest delete horizon of a tombstone it keeps
        self._horizons: dict[Partition, int] = {}
        #: partition -> (worker deaths in a row while cleaning it, no new clean before this time)
        self._worker_deaths: dict[Partition, tuple[int, int]] = {}
        self._threads: list[threading.Thread | None] = []
        self._supervisor: threading.Thread | None = None
        self.dead_threads = 0

    # -- lifetime ----------------------------------------------------------------------------------
    def startup(self) -> None:
        """Read the checkpoints (after the logs are loaded) and start the threads."""
        self.checkpoints = CleanerCheckpoints(list(self.logs.dirs))
        if not self.settings.enabled or self.settings.threads <= 0:
            log.info("log cleaner disabled")
            return
        self._stop.clear()
        if self.settings.switch_interval_s is not None:
            sys.setswitchinterval(self.settings.switch_interval_s)
        self._threads = [self._start_thread(i) for i in range(self.settings.threads)]
        self._supervisor = threading.Thread(target=self._supervise, name="log-cleaner-supervisor", daemon=True)
        self._supervisor.start()

    def shutdown(self) -> None:
        """Stop the threads (a clean in progress unwinds between batches) and wait for them."""
        self._stop.set()
        for thread in [*self._threads, self._supervisor]:
            if thread is not None:
                thread.join(JOIN_TIMEOUT_S)
        self._threads = []
        self._supervisor = None

    def new_cleaner(self) -> LogCleaner:
        """A cleaner with its own offset map (the dedupe buffer is split between the threads): in a worker
        process of its own (the default), or on the calling thread."""
        if self.settings.process:
            return ProcessCleaner(self.worker_settings, nice=self.settings.process_nice,
                                  should_stop=self._stop.is_set, swap_hook=self.swap_hook,
                                  fallback=self.thread_cleaner)
        return self.thread_cleaner()

    def thread_cleaner(self) -> Cleaner:
        """A cleaner that runs on the calling thread, its offset map in this process."""
        return Cleaner(OffsetMap(self._map_share(), self.settings.load_factor), self.throttler,
                       should_stop=self._stop.is_set, swap_hook=self.swap_hook)

    def _map_share(self) -> int:
        return self.settings.dedupe_buffer_size // max(self.settings.threads, 1)

    def worker_settings(self) -> WorkerSettings:
        """What a worker process cleans with, read at each clean (the throttle may have changed): its share
        of the dedupe buffer and of the I/O rate."""
        threads = max(self.settings.threads, 1)
        return WorkerSettings(self._map_share(), self.settings.load_factor,
                              self.throttler.bytes_per_second / threads, READ_CHUNK)

    def _start_thread(self, index: int) -> threading.Thread:
        thread = threading.Thread(target=self._run, args=(index,), name=f"log-cleaner-{index}", daemon=True)
        thread.start()
        return thread

    def _run(self, index: int) -> None:
        """A cleaner thread: clean the filthiest log, or wait `log.cleaner.backoff.ms` for one."""
        cleaner = self.new_cleaner()
        try:
            while not self._stop.is_set():
                if not self.clean_once(cleaner):
                    self._stop.wait(self.settings.backoff_ms / 1000)
        except BaseException as exc:  # the supervisor restarts us; say why we died
            log.error("cleaner thread died", thread=index, error=repr(exc), exc_info=True)
        finally:
            cleaner.close()

    def _supervise(self) -> None:
        while not self._stop.wait(SUPERVISE_INTERVAL_S):
            self.restart_dead_threads()

    def restart_dead_threads(self) -> int:
        """Start a new thread for each one that died; the number restarted."""
        restarted = 0
        for index, thread in enumerate(self._threads):
            if self._stop.is_set():
                break
            if thread is not None and not thread.is_alive():
                self.dead_threads += 1
                DEAD_THREADS.inc()
                log.error("restarting dead cleaner thread", thread=index, dead_threads=self.dead_threads)
                self._threads[index] = self._start_thread(index)
                restarted += 1
        return restarted

    # -- selection ---------------------------------------------------------------------------------
    def _cleanable_logs(self) -> list[_Candidate]:
        now = self.clock_ms()
        found = []
        for candidate in self.logs.logs():
            key = (candidate.topic, candidate.partition)
            log_dir = self.logs.dir_of(candidate.topic, candidate.partition)
            if (log_dir is None or candidate.closed or not candidate.config.compact or key in self._in_progress
                    or key in self._uncleanable.get(log_dir, {}) or not self.is_dir_online(log_dir)
                    or self._worker_deaths.get(key, (0, 0))[1] > now):
                continue
            section = dirty_section(candidate, self.checkpoints.get(log_dir, key), now)
            found.append(_Candidate(candidate, log_dir, section))
        return found

    def grab_filthiest(self) -> _Candidate | None:
        """The log to clean next, marked in progress; None when no log needs it."""
        with self._lock:
            candidates = self._cleanable_logs()
            dirty = [c for c in candidates if c.section.needs_cleaning(c.log.config.min_cleanable_dirty_ratio)]
            if dirty:
                chosen = max(dirty, key=lambda c: (c.section.overdue, c.section.ratio))
            else:
                now = self.clock_ms()
                expired = [c for c in candidates
                           if 0 <= self._horizons.get((c.log.topic, c.log.partition), NO_HORIZON) <= now]
                if not expired:
                    return None
                chosen = expired[0]
            self._in_progress.add((chosen.log.topic, chosen.log.partition))
            return chosen

    # -- cleaning ----------------------------------------------------------------------------------
    def clean_once(self, cleaner: LogCleaner) -> bool:
        """Clean the filthiest log once; False when there was nothing to clean."""
        candidate = self.grab_filthiest()
        if candidate is None:
            return False
        target, log_dir, section = candidate.log, candidate.log_dir, candidate.section
        key = (target.topic, target.partition)
        try:
            result = cleaner.clean(target, section.first_dirty, section.first_uncleanable, self.clock_ms())
        except WorkerDied as exc:
            if self._stop.is_set():  # stopping: a signal to the whole process group may have taken it
                CLEANER_RUNS.labels("aborted").inc()
                log.info("clean aborted: cleaner worker gone while stopping", topic=key[0], partition=key[1])
            else:
                self._worker_died(target, log_dir, exc)
        except CleaningAborted as exc:
            CLEANER_RUNS.labels("aborted").inc()
            log.info("clean aborted", topic=key[0], partition=key[1], reason=str(exc))
        except Exception as exc:
            if target.closed:  # deleted or closed under the clean: nothing is wrong with the log
                CLEANER_RUNS.labels("aborted").inc()
                log.info("clean aborted: log closed", topic=key[0], partition=key[1])
            else:
                self._fail(target, log_dir, exc)
        else:
            self._done(target, log_dir, section, result)
        finally:
            with self._lock:
                self._in_progress.discard(key)
        return True

    def _worker_died(self, target: Log, log_dir: Path, exc: WorkerDied) -> None:
        """The worker died under this clean: retry after `log.cleaner.backoff.ms` (and give up on the
        partition, loudly, once it has happened `MAX_WORKER_DEATHS` times in a row)."""
        key = (target.topic, target.partition)
        CLEANER_RUNS.labels("aborted").inc()
        WORKER_DEATHS.inc()
        with self._lock:
            deaths = self._worker_deaths.get(key, (0, 0))[0] + 1
            self._worker_deaths[key] = (deaths, self.clock_ms() + self.settings.backoff_ms)
        if deaths >= MAX_WORKER_DEATHS:
            with self._lock:
                self._worker_deaths.pop(key, None)
            self._fail(target, log_dir, RuntimeError(f"{exc} ({deaths} times in a row while cleaning it)"))
            return
        log.warning("cleaner worker died; the clean will be retried", topic=key[0], partition=key[1],
                    reason=str(exc), deaths_in_a_row=deaths, retry_in_ms=self.settings.backoff_ms)

    def _done(self, target: Log, log_dir: Path, section: DirtySection, result: CleanResult) -> None:
        key = (target.topic, target.partition)
        with self._lock:
            self._worker_deaths.pop(key, None)
        keep = {(lg.topic, lg.partition) for lg in self.logs.logs() if self.logs.dir_of(lg.topic, lg.partition) == log_dir}
        try:
            self.checkpoints.update(log_dir, key, result.end_offset, keep)
        except OSError as exc:
            self._fail(target, log_dir, exc)
            return
        with self._lock:
            horizon = result.filter.earliest_horizon_ms
            if horizon == NO_HORIZON:
                self._horizons.pop(key, None)
            else:
                self._horizons[key] = horizon
        CLEANER_RUNS.labels("cleaned").inc()
        BYTES_RECLAIMED.inc(result.bytes_reclaimed)
        if result.malformed:
            first = result.malformed[0]
            MALFORMED_BATCHES.inc(len(result.malformed))
            log.warning("kept batches whose records cannot be decoded as they are; their keys are not compacted",
                        topic=key[0], partition=key[1], offset=first.base_offset, reason=first.reason,
                        batches=len(result.malformed))
        log.info("cleaned log", topic=key[0], partition=key[1], first_dirty=section.first_dirty,
                 end_offset=result.end_offset, dirty_ratio=round(section.ratio, 3), map_keys=result.map_keys,
                 segments_before=result.segments_before, segments_after=result.segments_after,
                 bytes_read=result.bytes_read, bytes_written=result.bytes_written,
                 records_read=result.filter.records_read, records_kept=result.filter.records_kept)

    def _fail(self, target: Log, log_dir: Path, exc: Exception) -> None:
        key = (target.topic, target.partition)
        reason = f"{type(exc).__name__}: {exc}"
        with self._lock:
            marked = self._uncleanable.setdefault(log_dir, {})
            marked[key] = reason
            UNCLEANABLE_PARTITIONS.labels(str(log_dir)).set(len(marked))
        CLEANER_RUNS.labels("failed").inc()
        log.error("clean failed; partition marked uncleanable until restart", topic=key[0], partition=key[1],
                  log_dir=str(log_dir), reason=reason, exc_info=exc)
        if isinstance(exc, OSError):
            self.on_io_error(log_dir, exc)

    def held_off(self, key: Partition, timeout_s: float = 1.0) -> contextlib.AbstractContextManager[bool]:
        """Keep the cleaner off one partition while a move between log dirs swaps it (Kafka pauses cleaning
        there): waits for a clean of it in progress to end, then none starts until the block ends. The
        block gets False (and holds nothing) when that clean did not end within `timeout_s` (the move copies
        on meanwhile, so the lag it copies under its pause stays small)."""
        return self._held_off(key, timeout_s)

    @contextlib.contextmanager
    def _held_off(self, key: Partition, timeout_s: float) -> Iterator[bool]:
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if key not in self._in_progress:
                    self._in_progress.add(key)
                    break
            if time.monotonic() >= deadline:
                yield False
                return
            time.sleep(HELD_OFF_POLL_S)
        try:
            yield True
        finally:
            with self._lock:
                self._in_progress.discard(key)

    # -- state, for tests and admin tools ----------------------------------------------------------
    def uncleanable(self) -> dict[Partition, str]:
        with self._lock:
            return {key: why for marked in self._uncleanable.values() for key, why in marked.items()}

    def first_dirty_offset(self, target: Log) -> int | None:
        log_dir = self.logs.dir_of(target.topic, target.partition)
        return None if log_dir is None else self.checkpoints.get(log_dir, (target.topic, target.partition))

    def clean_now(self) -> bool:
        """One clean on the calling thread (tests and tools): False when nothing needed cleaning."""
        cleaner = self.new_cleaner()
        try:
            return self.clean_once(cleaner)
        finally:
            cleaner.close()
