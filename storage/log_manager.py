"""All logs of this broker across its log dirs: ownership, identity, topics, placement, durability.

Startup locks every dir, checks `meta.properties`, loads the topic table, and opens each partition
dir: fast after a clean shutdown (the marker is present), recovering everything above the recovery
point after a crash. A partition dir that no known topic claims (unknown name, partition beyond the
count, or a `partition.metadata` naming another topic id) is renamed `<dir>.<uuid>-stray` and left
for the operator, never deleted and never resurrected. New partitions go to the dir holding fewest.
Shutdown flushes and closes every log, writes the checkpoints and then the clean-shutdown marker.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pybroker.storage.checkpoints import LOG_START_OFFSET, RECOVERY_POINT, read_checkpoint, write_checkpoint
from pybroker.storage.dir_names import renamed_dir_name
from pybroker.storage.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    LogClosedError,
    LogDirsOfflineError,
    StorageError,
    TopicExistsError,
    UnknownTopicError,
)
from pybroker.storage.files import fsync_dir, remove_temp_files
from pybroker.storage.flusher import Flusher
from pybroker.storage.log import Log, wall_clock_ms
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir import (
    clear_clean_shutdown,
    ensure_meta_properties,
    had_clean_shutdown,
    lock_dir,
    mark_clean_shutdown,
    unlock_dir,
)
from pybroker.storage.log_dir_failure import LogDirFailureChannel
from pybroker.storage.retention import Verdict
from pybroker.storage.topic_store import (
    TopicInfo,
    TopicStore,
    read_partition_metadata,
    write_partition_metadata,
)

__all__ = ["LogManager", "RecoveryStats", "TopicInfo", "validate_topic_name"]

#: `<topic>-<partition>`, matched whole (`fullmatch`); any topic text, so a topic an older version let in
#: with an illegal name (say, ending in a newline) still finds its data
PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>[0-9]+)", re.DOTALL)
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
MAX_TOPIC_LENGTH = 249
#: Kafka's `Topic.LEGAL_CHARS`, always used with `fullmatch` (`$` would also match before a final newline)
_LEGAL_CHARS = re.compile(r"[a-zA-Z0-9._-]*")

#: Kafka's topic-name rules (`Topic.validate`), in order, with Kafka's messages
_TOPIC_NAME_RULES: list[tuple[Callable[[str], bool], str]] = [
    (lambda name: not name, "Topic name is illegal, it can't be empty"),
    (lambda name: name in (".", ".."), 'Topic name cannot be "." or ".."'),
    (lambda name: len(name) > MAX_TOPIC_LENGTH,
     "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"),
    (lambda name: not _LEGAL_CHARS.fullmatch(name),
     "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' "
     "and '-'"),
]


def validate_topic_name(name: str) -> None:
    for broken, message in _TOPIC_NAME_RULES:
        if broken(name):
            raise InvalidTopicError(message.format(name=name))


@dataclass(slots=True)
class RecoveryStats:
    """What loading one log dir took."""

    log_dir: str
    clean_shutdown: bool
    partitions: int = 0
    segments_recovered: int = 0
    bytes_truncated: int = 0
    stray_partitions: int = 0
    seconds: float = 0.0


class LogManager:
    def __init__(self, log_dirs: list[Path], *, node_id: int, log_config_for: Callable[[dict[str, str]], LogConfig],
                 clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.dirs = [Path(d).absolute() for d in log_dirs]
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
        self._store.on_error = self.failures.report

    # -- startup -----------------------------------------------------------------------------------
    def startup(self) -> list[RecoveryStats]:
        """Lock and load every log dir; one `RecoveryStats` per dir."""
        try:
            for directory in self.dirs:
                directory.mkdir(parents=True, exist_ok=True)
                self._locks.append(lock_dir(directory))
                remove_temp_files(directory)  # of rewrites a crash interrupted (partition dirs: the loader)
            self.cluster_id = ensure_meta_properties(self.dirs, self.node_id)
            self._topics = self._store.load()
            self._by_id = {info.topic_id: info for info in self._topics.values()}
            stats = [self._load_dir(directory) for directory in self.dirs]
            for info in self._topics.values():
                self._create_partitions(info, info.num_partitions)  # any whose dir went missing
            for directory in self.dirs:
                clear_clean_shutdown(directory)
        except BaseException:
            self._abandon()
            raise
        self._flushers = {directory: Flusher(directory.name) for directory in self.dirs}
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

    def _load_dir(self, directory: Path) -> RecoveryStats:
        started = time.monotonic()
        clean = had_clean_shutdown(directory)
        recovery_points = read_checkpoint(directory / RECOVERY_POINT)
        start_offsets = read_checkpoint(directory / LOG_START_OFFSET)
        stats = RecoveryStats(str(directory), clean)
        for child in sorted(directory.iterdir()):
            if not child.is_dir() or child.name.endswith(STRAY_SUFFIX):
                continue
            if child.name.endswith(DELETE_SUFFIX):  # a deletion that a crash interrupted
                shutil.rmtree(child, ignore_errors=True)
                continue
            match = PARTITION_DIR.fullmatch(child.name)
            if match is None or not (_LEGAL_CHARS.fullmatch(match["topic"]) or match["topic"] in self._topics):
                continue  # not a partition dir (an illegal name is one only if a topic has it)
            key = (match["topic"], int(match["partition"]))
            info = self._topics.get(key[0])
            owner = read_partition_metadata(child)
            if info is None or key[1] >= info.num_partitions or key in self._logs or \
                    owner not in (None, info.topic_id):
                _set_aside(child)
                stats.stray_partitions += 1
                continue
            log = Log(child, key[0], key[1], info.topic_id, self.log_config_for(info.configs),
                      recovery_point=recovery_points.get(key, 0), log_start_offset=start_offsets.get(key, 0),
                      clean=clean, clock_ms=self.clock_ms)
            if owner is None:
                write_partition_metadata(child, info.topic_id)
            self._logs[key] = log
            self._dir_of[key] = directory
            stats.partitions += 1
            stats.segments_recovered += log.load_stats.segments_recovered
            stats.bytes_truncated += log.load_stats.bytes_truncated
        stats.seconds = round(time.monotonic() - started, 3)
        return stats

    # -- topics ------------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicInfo]:
        return self._topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    def dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding a partition."""
        return self._dir_of.get((topic, partition))

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str]) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        collision = next((t for t in self._topics if t.replace(".", "_") == name.replace(".", "_")), None)
        if collision is not None:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {collision}")
        if num_partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        info = TopicInfo(name, uuid.uuid4(), 0, dict(configs))
        try:
            self._create_partitions(info, num_partitions)
        except BaseException:
            self._drop_logs(name, num_partitions)
            raise
        self._topics[name] = info
        self._by_id[info.topic_id] = info
        self._store.save(self._topics)
        return info

    def add_partitions(self, name: str, new_total: int) -> TopicInfo:
        info = self._topic(name)
        if new_total <= info.num_partitions:
            raise InvalidPartitionsError(f"Topic currently has {info.num_partitions} partitions, which is "
                                         f"higher than the requested {new_total}.")
        self._create_partitions(info, new_total)
        self._store.save(self._topics)
        return info

    def delete_topic(self, name: str) -> None:
        """Forget the topic (durably, first), then remove its partition dirs."""
        info = self._topic(name)
        del self._topics[name]
        self._by_id.pop(info.topic_id, None)
        self._store.save(self._topics)
        self._drop_logs(name, info.num_partitions)

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's overrides; its logs take the new settings from their next append."""
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

    def _create_partitions(self, info: TopicInfo, total: int) -> None:
        """Create the missing partition logs below `total`, each in the online dir with the fewest partitions
        (a dir that fails while a partition is made there goes offline, and the next one is tried)."""
        config = self.log_config_for(info.configs)
        for partition in range(total):
            key = (info.name, partition)
            while key not in self._logs:
                online = [d for d in self.dirs if self.failures.is_online(d)]
                if not online:
                    raise LogDirsOfflineError("every log dir is offline")
                directory = min(online, key=lambda d: sum(1 for v in self._dir_of.values() if v == d))
                try:
                    self._create_log(info, partition, directory, config)
                except OSError as exc:
                    self.failures.report(directory, exc)
        info.num_partitions = max(info.num_partitions, total)

    def _create_log(self, info: TopicInfo, partition: int, directory: Path, config: LogConfig) -> None:
        path = directory / f"{info.name}-{partition}"
        if path.exists():
            _set_aside(path)
        path.mkdir()
        write_partition_metadata(path, info.topic_id)
        fsync_dir(directory)
        key = (info.name, partition)
        self._logs[key] = Log(path, info.name, partition, info.topic_id, config, clock_ms=self.clock_ms)
        self._dir_of[key] = directory

    def _drop_logs(self, name: str, num_partitions: int) -> None:
        for partition in range(num_partitions):
            log = self._logs.pop((name, partition), None)
            self._dir_of.pop((name, partition), None)
            if log is not None:
                log.delete()
                with self._deleted_lock:
                    self._deleted.append(log)

    # -- durability --------------------------------------------------------------------------------
    def flusher_for(self, log: Log) -> Flusher:
        directory = self._dir_of.get((log.topic, log.partition), log.dir.parent)
        return self._flushers[directory]

    def flush_dirty(self, now_ms: int) -> None:
        """The flush policy for data no acks=all producer waits on: flush.messages and flush.ms."""
        with self._deleted_lock:
            self._deleted = [log for log in self._deleted if not log.release_retired(now_ms)]
        for log in list(self._logs.values()):
            log.release_retired(now_ms)
            unflushed = log.unflushed_messages
            if unflushed <= 0:
                continue
            config = log.config
            if unflushed >= config.flush_interval_messages or now_ms - log.last_flush_ms >= config.flush_interval_ms:
                if not self.is_online(log):
                    continue
                try:
                    log.flush()
                except LogClosedError:
                    continue
                except OSError as exc:
                    self.report_io_error(log, exc)

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

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, mark each healthy dir clean, release locks."""
        if not self._running:
            return
        self._running = False
        for flusher in self._flushers.values():
            flusher.close()
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


def _set_aside(path: Path) -> None:
    """Rename a partition dir nobody claims to Kafka's stray form (at most 255 bytes), keeping its data."""
    path.rename(path.with_name(renamed_dir_name(path.name, STRAY_SUFFIX)))
