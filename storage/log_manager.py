"""All logs of this broker across its log dirs: ownership, identity, topics, placement, durability.

Startup locks every dir, checks `meta.properties`, loads the topic table, and opens each partition
dir (`storage.partition_dirs`: which dirs are partitions it owns, which are strays set aside). New
partitions go to the dir holding fewest. Shutdown flushes and closes every log, writes the checkpoints
and then the clean-shutdown marker.

Threads: topics are created, grown and deleted on worker threads while the event loop appends, reads and
answers Metadata. The loop takes no lock: the topic table and the log maps are replaced, never changed in
place, and a topic (or its new partitions) is published only after every partition exists and the topic
table is saved, so a half-made topic is never seen. A change runs in three steps: a short check and
reservation under `_mutation_lock` (the name is marked busy, the partitions counted against the cap),
the disk work without the lock, then a short save-and-publish under the lock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from pybroker.storage.checkpoints import LOG_START_OFFSET, RECOVERY_POINT, write_checkpoint
from pybroker.storage.clock import wall_clock_ms
from pybroker.storage.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    LogClosedError,
    LogDirsOfflineError,
    PartitionLimitError,
    StorageError,
    TopicBusyError,
    TopicExistsError,
    UnknownTopicError,
)
from pybroker.storage.files import fsync_dir, make_dirs_durably, remove_temp_files
from pybroker.storage.flush_window import FlushWindow
from pybroker.storage.flusher import Flusher
from pybroker.storage.kraft_export import kafka_ran_since_export
from pybroker.storage.kraft_metadata import KraftImage, adopt_kraft_metadata
from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir import (
    META_PROPERTIES,
    clear_clean_shutdown,
    ensure_meta_properties,
    lock_dir,
    mark_clean_shutdown,
    unlock_dir,
)
from pybroker.storage.log_dir_failure import LogDirFailureChannel, is_resource_exhaustion
from pybroker.storage.log_mover import LogDirMover, settle_future_dirs
from pybroker.storage.metadata_log import live_metadata_dir
from pybroker.storage.page_cache import UNLIMITED, PageCache
from pybroker.storage.partition_dirs import PARTITION_DIR, PartitionDirLoader, set_aside
from pybroker.storage.recovery_stats import RecoveryStats
from pybroker.storage.retention import Verdict
from pybroker.storage.topic_names import validate_topic_name
from pybroker.storage.topic_store import (
    TopicInfo,
    TopicStore,
    write_partition_metadata,
)

__all__ = ["LogManager", "RecoveryStats", "TopicInfo", "validate_topic_name"]

#: no cap unless the broker sets one (`max.broker.partitions`, the descriptor budget)
NO_LIMIT = 2**31 - 1
#: how often idle segment files are looked for (a file unused for one to two periods is closed)
IDLE_FILE_SWEEP_MS = 60_000
class LogManager:
    def __init__(self, log_dirs: list[Path], *, node_id: int, log_config_for: Callable[[dict[str, str]], LogConfig],
                 clock_ms: Callable[[], int] = wall_clock_ms, page_cache: PageCache = UNLIMITED) -> None:
        self.dirs = [Path(d).absolute() for d in log_dirs]
        #: the budget of fsynced log bytes left in the page cache, shared by every log (`storage.page_cache`)
        self.page_cache = page_cache
        self.node_id = node_id
        self.log_config_for = log_config_for
        self.clock_ms = clock_ms
        self.cluster_id = ""
        self._locks: list[int] = []
        self._logs: dict[tuple[str, int], Log] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        self._topics: dict[str, TopicInfo] = {}
        #: Fetch v13+ and Metadata v12+ name topics by id: one dict lookup, not a scan per request
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._flushers: dict[Path, Flusher] = {}
        #: fsyncs acks 0/1 data within its topic's flush.ms (`storage.flush_window`); made at startup
        self.flush_window: FlushWindow | None = None
        self._store = TopicStore(self.dirs)
        #: one checkpoint pass at a time, each reading the offsets it writes under the lock, so a pass
        #: that read older offsets can never land after a newer one (DeleteRecords would come undone)
        self._checkpoint_lock = threading.Lock()
        self._running = False
        #: deleted logs whose files stay open for reads already handed out (see `Log.delete`)
        self._deleted: list[Log] = []
        self._deleted_lock = threading.Lock()
        #: the choke point for I/O errors: a failing dir goes offline as a whole
        self.failures = LogDirFailureChannel()
        self._store.is_online = self.failures.is_online
        self._store.on_error = self._store_error
        #: serialises the check-and-reserve and save-and-publish steps of topic changes (module docstring)
        self._mutation_lock = threading.Lock()
        #: topics some request is creating, growing or deleting right now
        self._busy: set[str] = set()
        #: partitions reserved by changes in progress, not yet in `_logs`
        self._reserved = 0
        #: partitions per dir, kept up to date by placement and deletion (placement is O(dirs), not O(P))
        self._dir_counts: dict[Path, int] = {}
        self._placement_lock = threading.Lock()
        #: the most partitions this broker holds: `max.broker.partitions` and the descriptor budget
        self.max_partitions = NO_LIMIT
        #: what sets `max_partitions`, for the refusal's message
        self.max_partitions_source = "no limit"
        self.idle_file_sweep_ms = IDLE_FILE_SWEEP_MS
        self._last_idle_sweep_ms = clock_ms()
        #: partitions moving between log dirs (AlterReplicaLogDirs), one at a time on its own thread
        self.moves = LogDirMover(self)
        #: Kafka's metadata image when this start took over a Kafka node's log dir (its ACLs and SCRAM
        #: users are for the broker layer to store); None otherwise
        self.kraft_image: KraftImage | None = None
        #: True when that image replaces pybroker's own metadata: Kafka served the dirs after an export
        self.kraft_replaces_ours = False

    # -- startup -----------------------------------------------------------------------------------
    def startup(self) -> list[RecoveryStats]:
        """Lock and load every log dir; one `RecoveryStats` per dir."""
        try:
            for directory in self.dirs:
                make_dirs_durably(directory)
                self._locks.append(lock_dir(directory))
                remove_temp_files(directory)  # of rewrites a crash interrupted (partition dirs: the loader)
            new_dirs = {d for d in self.dirs if not (d / META_PROPERTIES).exists()}
            self.cluster_id = ensure_meta_properties(self.dirs, self.node_id)
            self._topics = self._store.load()
            # the live metadata log decides (storage/metadata_log.py); else Kafka's, if it served the dirs after
            # `pybroker export-kraft`; else Kafka's when there is no table of our own (a dir Kafka left)
            kafka_since = live_metadata_dir(self.dirs[0]) or kafka_ran_since_export(self.dirs[0])
            if kafka_since is not None or (not self._topics and self._store.version == 0):
                self.kraft_image = adopt_kraft_metadata(self.dirs, kafka_since)
                self.kraft_replaces_ours = kafka_since is not None
                if self.kraft_image is not None:
                    self._topics = self.kraft_image.topics()
                    self._store.save(self._topics)  # the export's mark goes once the broker's stores are too
            self._by_id = {info.topic_id: info for info in self._topics.values()}
            settle_future_dirs(self.dirs, lambda name: PARTITION_DIR.fullmatch(name) is not None)
            loader = PartitionDirLoader(self._topics, self.log_config_for, clock_ms=self.clock_ms,
                                        page_cache=self.page_cache)
            stats = [loader.load(directory, new_dir=directory in new_dirs, logs=self._logs, dir_of=self._dir_of)
                     for directory in self.dirs]
            self._dir_counts = {directory: 0 for directory in self.dirs}
            for directory in self._dir_of.values():
                self._dir_counts[directory] += 1
            for info in self._topics.values():  # any whose dir went missing
                missing = [p for p in range(info.num_partitions) if (info.name, p) not in self._logs]
                if missing:
                    self._publish(self._create_partitions(info, missing))
            for directory in self.dirs:
                clear_clean_shutdown(directory)
        except BaseException:
            self._abandon()
            raise
        self._flushers = {directory: Flusher(directory.name) for directory in self.dirs}
        self.flush_window = FlushWindow(self._window_flush)
        self._running = True
        return stats

    def _abandon(self) -> None:
        """Undo a failed startup: close what was opened, release the locks."""
        for log in self._logs.values():
            with contextlib.suppress(Exception):
                log.close()
        self._logs.clear()
        self._dir_of.clear()
        for fd in self._locks:
            unlock_dir(fd)
        self._locks = []

    # -- topics ------------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicInfo]:
        return self._topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    @property
    def table(self) -> Mapping[tuple[str, int], Log]:
        """The logs now: replaced whole, never changed, by each creation, deletion and move (`empty_reads`)."""
        return self._logs

    def dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding a partition."""
        return self._dir_of.get((topic, partition))

    @property
    def partition_count(self) -> int:
        """Partitions this broker holds, with those that changes in progress have reserved."""
        return len(self._logs) + self._reserved

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str]) -> TopicInfo:
        """Create a topic (safe from a worker thread; the loop sees it only once it is complete)."""
        outcome = self.create_topics([(name, num_partitions, configs)])[name]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def create_topics(self, wanted: list[tuple[str, int, dict[str, str]]]) -> dict[str, TopicInfo | Exception]:
        """Create topics (name, partitions, overrides) together, from a worker thread: each is checked and
        its partitions reserved, all partitions are made, then the topic table is saved ONCE and all the
        topics are published (one fsync'd save per request, not one per topic). Each name maps to its
        `TopicInfo` or to the error that refused it (`StorageError`, or `OSError` from the disk)."""
        outcomes: dict[str, TopicInfo | Exception] = {}
        accepted: list[TopicInfo] = []
        with self._mutation_lock:
            normalized = {t.replace(".", "_"): t for t in [*self._topics, *self._busy]}
            for name, num_partitions, configs in wanted:
                try:
                    self._check_running()
                    self._check_new_topic(name, num_partitions, normalized)
                    self._reserve(name, num_partitions)
                except StorageError as exc:
                    outcomes.setdefault(name, exc)
                    continue
                normalized[name.replace(".", "_")] = name
                accepted.append(TopicInfo(name, uuid.uuid4(), num_partitions, dict(configs)))
        made: list[tuple[TopicInfo, dict[tuple[str, int], tuple[Log, Path]]]] = []
        try:
            for info in accepted:
                try:
                    made.append((info, self._create_partitions(info, range(info.num_partitions))))
                except (StorageError, OSError, MemoryError) as exc:
                    outcomes[info.name] = exc
            if made:
                self._save_and_publish_new(made)
        except BaseException as exc:
            for info, created in made:
                self._discard(created)
                if isinstance(exc, Exception):
                    outcomes[info.name] = exc
            if not isinstance(exc, (StorageError, OSError, MemoryError)):
                raise
        else:
            outcomes.update((info.name, info) for info, _ in made)
        finally:
            for info in accepted:
                self._release(info.name, info.num_partitions)
        return outcomes

    def _check_new_topic(self, name: str, num_partitions: int, normalized: dict[str, str]) -> None:
        """Under `_mutation_lock`: Kafka's rules for a new topic; `normalized` maps each known or busy name,
        with '.' read as '_', to itself (Kafka refuses names that differ only there)."""
        validate_topic_name(name)
        if num_partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if name in self._topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if name in self._busy:
            raise TopicExistsError(f"Topic '{name}' is being created or deleted.")
        collision = normalized.get(name.replace(".", "_"))
        if collision is not None:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {collision}")

    def _save_and_publish_new(self, made: list[tuple[TopicInfo, dict[tuple[str, int], tuple[Log, Path]]]]) -> None:
        with self._mutation_lock:
            self._check_running()
            topics = {**self._topics, **{info.name: info for info, _ in made}}
            self._store.save(topics)
            for _, created in made:
                self._publish(created)
            self._topics = topics
            self._by_id = {**self._by_id, **{info.topic_id: info for info, _ in made}}

    def add_partitions(self, name: str, new_total: int) -> TopicInfo:
        """Grow a topic to `new_total` partitions (safe from a worker thread)."""
        with self._mutation_lock:
            self._check_running()
            info = self._topic(name)
            if name in self._busy:
                raise TopicBusyError(f"Topic '{name}' is being changed by another request.")
            current = info.num_partitions
            if new_total <= current:
                raise InvalidPartitionsError(f"Topic currently has {current} partitions, which is "
                                             f"higher than the requested {new_total}.")
            self._reserve(name, new_total - current)
        created: dict[tuple[str, int], tuple[Log, Path]] = {}
        try:
            created = self._create_partitions(info, range(current, new_total))
            with self._mutation_lock:
                self._check_running()
                self._store.save({**self._topics, name: dataclasses.replace(info, num_partitions=new_total)})
                self._publish(created)
                info.num_partitions = new_total  # after the logs: a reader never sees a partition without one
        except BaseException:
            self._discard(created)
            raise
        finally:
            self._release(name, new_total - current)
        return info

    def delete_topic(self, name: str) -> None:
        """Forget the topic (durably, first), then remove its partition dirs (safe from a worker thread)."""
        outcome = self.delete_topics([name])[name]
        if outcome is not None:
            raise outcome

    def delete_topics(self, names: list[str]) -> dict[str, Exception | None]:
        """Forget the topics with ONE save of the topic table, then remove their partition dirs (from a
        worker thread). Each name maps to None, or the error that kept it (`StorageError`, `OSError`)."""
        outcomes: dict[str, Exception | None] = {}
        doomed: dict[tuple[str, int], tuple[Log, Path]] = {}
        with self._mutation_lock:
            going: list[TopicInfo] = []
            for name in dict.fromkeys(names):
                try:
                    self._check_running()
                    info = self._topic(name)
                    if name in self._busy:
                        raise TopicBusyError(f"Topic '{name}' is being changed by another request.")
                except StorageError as exc:
                    outcomes[name] = exc
                    continue
                going.append(info)
            if going:
                gone = {info.name for info in going}
                remaining = {n: t for n, t in self._topics.items() if n not in gone}
                try:
                    self._store.save(remaining)
                except (StorageError, OSError) as exc:
                    outcomes.update((info.name, exc) for info in going)
                    return outcomes
                ids = {info.topic_id for info in going}
                self._topics = remaining
                self._by_id = {i: t for i, t in self._by_id.items() if i not in ids}
                doomed = self._unpublish([(info.name, p) for info in going for p in range(info.num_partitions)])
                self._busy.update(gone)  # until their dirs are gone: a new topic of a name must not meet them
        by_topic: dict[str, dict[tuple[str, int], tuple[Log, Path]]] = {}
        for key, value in doomed.items():
            by_topic.setdefault(key[0], {})[key] = value
        try:
            for info in going:
                try:
                    self._drop_logs(by_topic.get(info.name, {}))
                    outcomes[info.name] = None
                except OSError as exc:
                    outcomes[info.name] = exc
        finally:
            with self._mutation_lock:
                self._busy.difference_update(info.name for info in going)
        return outcomes

    def _check_running(self) -> None:
        """Under `_mutation_lock`: no topic change is published once shutdown began (it would not be closed)."""
        if not self._running:
            raise LogClosedError("the broker is shutting down")

    def _reserve(self, name: str, count: int) -> None:
        """Under `_mutation_lock`: refuse a change that would pass the cap, else mark the topic busy."""
        held = self.partition_count
        if held + count > self.max_partitions:
            raise PartitionLimitError(
                f"Creating {count} partitions would give this broker {held + count}, more than its limit of "
                f"{self.max_partitions} ({self.max_partitions_source}).")
        self._reserved += count
        self._busy.add(name)

    def _release(self, name: str, count: int) -> None:
        with self._mutation_lock:
            self._reserved -= count
            self._busy.discard(name)

    def _store_error(self, directory: Path, exc: OSError) -> None:
        """A failed topic-table write: out of descriptors or memory fails the change; any other error
        takes that dir offline (the other dirs still hold the table)."""
        if is_resource_exhaustion(exc):
            raise exc
        self.failures.report(directory, exc)

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's overrides; its logs take the new settings from their next append."""
        with self._mutation_lock:
            info = self._topic(name)
            info.configs = dict(configs)
            self._store.save(self._topics)
        config = self.log_config_for(info.configs)
        for partition in range(info.num_partitions):
            log = self._logs.get((name, partition))
            if log is not None:
                log.update_config(config)

    def reapply_configs(self) -> None:
        """Recompute every log's settings (after a broker-level default changed at runtime)."""
        for info in list(self._topics.values()):
            config = self.log_config_for(info.configs)
            for partition in range(info.num_partitions):
                log = self._logs.get((info.name, partition))
                if log is not None:
                    log.update_config(config)

    def _topic(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        return info

    def _create_partitions(self, info: TopicInfo,
                           partitions: range | list[int]) -> dict[tuple[str, int], tuple[Log, Path]]:
        """New logs for `partitions`, each in the online dir with the fewest partitions, not yet published.

        A dir that fails while a partition is made there goes offline and the next one is tried. Running
        out of descriptors or memory fails the whole creation (no dir goes offline). On any failure the
        logs made so far are removed again: only what was created is cleaned up.
        """
        config = self.log_config_for(info.configs)
        created: dict[tuple[str, int], tuple[Log, Path]] = {}
        try:
            for partition in partitions:
                while True:
                    directory = self._place()
                    try:
                        log = self._create_log(info, partition, directory, config)
                    except BaseException as exc:
                        self._unplace(directory)
                        if not isinstance(exc, OSError | MemoryError):
                            raise
                        # a failing disk goes offline (then the next dir is tried); running out of
                        # descriptors is only counted and logged, and fails this creation
                        self.failures.report(directory, exc)
                        if is_resource_exhaustion(exc):
                            raise
                        continue
                    created[(info.name, partition)] = (log, directory)
                    break
        except BaseException:
            self._discard(created)
            raise
        return created

    def _place(self) -> Path:
        """The online dir with the fewest partitions, counted as holding one more."""
        with self._placement_lock:
            online = [d for d in self.dirs if self.failures.is_online(d)]
            if not online:
                raise LogDirsOfflineError("every log dir is offline")
            directory = min(online, key=lambda d: self._dir_counts.get(d, 0))
            self._dir_counts[directory] = self._dir_counts.get(directory, 0) + 1
            return directory

    def _unplace(self, directory: Path) -> None:
        with self._placement_lock:
            self._dir_counts[directory] -= 1

    def _create_log(self, info: TopicInfo, partition: int, directory: Path, config: LogConfig) -> Log:
        path = directory / f"{info.name}-{partition}"
        if path.exists():
            set_aside(path)
        path.mkdir()
        write_partition_metadata(path, info.topic_id)
        fsync_dir(directory)
        return Log(path, info.name, partition, info.topic_id, config, clock_ms=self.clock_ms,
                   page_cache=self.page_cache)

    def _publish(self, created: dict[tuple[str, int], tuple[Log, Path]]) -> None:
        """Make new logs visible: one replacement of each map, never a change in place."""
        if created:
            self._logs = {**self._logs, **{key: log for key, (log, _) in created.items()}}
            self._dir_of = {**self._dir_of, **{key: directory for key, (_, directory) in created.items()}}

    def _unpublish(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[Log, Path]]:
        """Take logs out of the maps (one replacement each); the removed (log, dir) pairs."""
        doomed = {key: (self._logs[key], self._dir_of[key]) for key in keys if key in self._logs}
        if doomed:
            self._logs = {key: log for key, log in self._logs.items() if key not in doomed}
            self._dir_of = {key: d for key, d in self._dir_of.items() if key not in doomed}
        return doomed

    def _discard(self, created: dict[tuple[str, int], tuple[Log, Path]]) -> None:
        """Remove logs that were never published: nobody read them, so their files close at once."""
        for log, directory in created.values():
            self._unplace(directory)
            with contextlib.suppress(Exception):
                log.abandon()
            shutil.rmtree(log.dir, ignore_errors=True)

    def _drop_logs(self, doomed: dict[tuple[str, int], tuple[Log, Path]]) -> None:
        """Delete unpublished logs whose reads may still be in flight (files kept for the delay)."""
        first: OSError | None = None
        for log, directory in doomed.values():
            self._unplace(directory)
            with self._deleted_lock:
                self._deleted.append(log)
            try:
                log.delete()
            except OSError as exc:
                first = first or exc
        if first is not None:
            raise first

    # -- moves between log dirs (`storage.log_mover`) ---------------------------------------------------
    @property
    def running(self) -> bool:
        return self._running

    @property
    def checkpoint_lock(self) -> threading.Lock:
        return self._checkpoint_lock

    @property
    def mutation_lock(self) -> threading.Lock:
        return self._mutation_lock

    def replace_log(self, key: tuple[str, int], old: Log, new: Log, directory: Path) -> None:
        """The ONE place a partition's Log object is replaced (a move's swap, under `mutation_lock`):
        one replacement of each map; the old log's open files are let go of by `flush_dirty`."""
        self._logs = {**self._logs, key: new}
        previous = self._dir_of[key]
        self._dir_of = {**self._dir_of, key: directory}
        with self._placement_lock:
            self._dir_counts[previous] -= 1
            self._dir_counts[directory] = self._dir_counts.get(directory, 0) + 1
        with self._deleted_lock:
            self._deleted.append(old)

    # -- durability --------------------------------------------------------------------------------
    def flusher_for(self, log: Log) -> Flusher:
        directory = self._dir_of.get((log.topic, log.partition), log.dir.parent)
        return self._flushers[directory]

    def dirtied(self, log: Log) -> None:
        """On the loop, after an acks 0/1 append nobody fsyncs now: it is fsynced within flush.ms."""
        window = self.flush_window
        if window is not None:
            window.dirtied(log)

    def _window_flush(self, log: Log) -> None:
        """The window's hand-over (its thread): one group-commit request up to the log end; an I/O error
        takes the dir offline, as any flush's does."""
        if not self.is_online(log):
            return
        try:
            flusher = self.flusher_for(log)
        except KeyError:  # its dir is not one of ours any more (a move's leftover): the move synced it
            return
        flusher.request(log, log.log_end_offset).add_done_callback(
            lambda done: self._window_flushed(log, done.exception()))

    def _window_flushed(self, log: Log, exc: BaseException | None) -> None:
        if isinstance(exc, OSError):
            self.report_io_error(log, exc)

    def flush_dirty(self, now_ms: int) -> None:
        """The flush policy for data no acks=all producer waits on: flush.messages (flush.ms is the flush
        window's, `storage.flush_window`)."""
        with self._deleted_lock:
            self._deleted = [log for log in self._deleted if not log.release_retired(now_ms)]
        if now_ms - self._last_idle_sweep_ms >= self.idle_file_sweep_ms:
            self._last_idle_sweep_ms = now_ms
            self.close_idle_files(now_ms)
        for log in list(self._logs.values()):
            log.release_retired(now_ms)
            unflushed = log.unflushed_messages
            if unflushed <= 0:
                continue
            if unflushed >= log.config.flush_interval_messages:
                if not self.is_online(log):
                    continue
                try:
                    log.flush()
                except LogClosedError:
                    continue
                except OSError as exc:
                    self.report_io_error(log, exc)

    def close_idle_files(self, now_ms: int) -> int:
        """Let go of segment files unused since the last sweep (safe from a worker thread): descriptors
        follow the partitions in use. Returns the files closed."""
        closed = 0
        for log in list(self._logs.values()):
            try:
                closed += log.close_idle_files(now_ms)
            except OSError as exc:
                self.report_io_error(log, exc)
        return closed

    def enforce_retention(self, now_ms: int) -> list[tuple[str, int, Verdict]]:
        """One retention pass over every log (safe from a worker thread): what each pass removed."""
        removed = []
        for (topic, partition), log in list(self._logs.items()):
            if not self.is_online(log):
                continue
            try:
                verdict = log.delete_old_segments(now_ms)
            except OSError as exc:
                self.report_io_error(log, exc)
                continue
            if verdict.count:
                removed.append((topic, partition, verdict))
        return removed

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords for one partition: the new log start offset, written to the checkpoint at once
        so the deleted records cannot come back after a crash."""
        log = self._logs.get((topic, partition))
        if log is None:
            raise KeyError((topic, partition))
        start = log.delete_records_before(offset)
        self.checkpoint()
        if not self.is_online(log):
            raise OSError(f"the log dir of {topic}-{partition} went offline before the new start was saved")
        return start

    # -- log dir failure ---------------------------------------------------------------------------
    @property
    def offline_dirs(self) -> set[Path]:
        return set(self.failures.offline)

    def is_online(self, log: Log) -> bool:
        if self.failures.all_online():
            return True
        directory = self._dir_of.get((log.topic, log.partition))
        return directory is None or self.failures.is_online(directory)

    def report_io_error(self, log: Log, exc: BaseException) -> None:
        """Any I/O error on a log's files: its whole dir goes offline (`LogDirFailureChannel`)."""
        directory = self._dir_of.get((log.topic, log.partition), log.dir.parent)
        self.failures.report(directory, exc)

    def checkpoint(self) -> None:
        """Write every dir's recovery points and log start offsets (safe from any thread)."""
        with self._checkpoint_lock:
            self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        logs = list(self._logs.items())
        dir_of = dict(self._dir_of)
        for directory in self.dirs:
            if not self.failures.is_online(directory):
                continue  # an offline dir's checkpoints are dropped, as Kafka does
            mine = [(key, log) for key, log in logs if dir_of.get(key) == directory]
            try:
                write_checkpoint(directory / RECOVERY_POINT, {key: log.recovery_point for key, log in mine})
                write_checkpoint(directory / LOG_START_OFFSET, {key: log.log_start_offset for key, log in mine})
            except OSError as exc:
                self.failures.report(directory, exc)
                if is_resource_exhaustion(exc):
                    raise  # the dir stays online, but the caller (DeleteRecords) must not claim it is saved

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, mark each healthy dir clean, release locks."""
        with self._mutation_lock:  # a topic change in progress publishes nothing after this
            if not self._running:
                return
            self._running = False
        self.moves.stop()  # an unfinished copy is removed; no swap starts once `_running` is False
        if self.flush_window is not None:
            self.flush_window.close()
        for flusher in self._flushers.values():
            flusher.close()
        self.page_cache.close()
        failed: set[Path] = set()
        first_error: Exception | None = None
        failed.update(self.failures.offline)
        for key, log in list(self._logs.items()):
            if self._dir_of[key] in failed:
                # an offline dir is left as the failure left it (recovery runs at the next start): no
                # snapshot, index or checkpoint is written to the failed disk, only the files are let go
                log.abandon()
                continue
            try:
                log.flush()
                log.close()
            except (OSError, StorageError) as exc:
                failed.add(self._dir_of[key])
                first_error = first_error or exc
        with self._deleted_lock:
            for log in self._deleted:
                log.release_retired()
            self._deleted = []
        try:
            self.checkpoint()
            for directory in self.dirs:
                if directory not in failed:
                    mark_clean_shutdown(directory)
        except OSError as exc:
            first_error = first_error or exc
        finally:
            for fd in self._locks:
                unlock_dir(fd)
            self._locks = []
        if first_error is not None:
            raise first_error

