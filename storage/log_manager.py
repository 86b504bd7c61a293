"""All logs of this broker across its log dirs: locking, identity, placement, startup and shutdown.

Each dir is locked with `flock` on `.lock` (a second broker fails fast), carries `meta.properties`
(cluster id and node id, checked at every start), Kafka's checkpoint files and, after a clean shutdown,
the `.kafka_cleanshutdown` marker: with it logs open fast, without it every segment above the recovery
point is re-validated and torn or garbage tails are cut. New partitions go to the dir holding the fewest.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pybroker.storage.checkpoints import LOG_START_OFFSET, RECOVERY_POINT, read_checkpoint, write_checkpoint
from pybroker.storage.errors import (
    InvalidTopicError,
    LogDirLockedError,
    MetaPropertiesError,
    TopicExistsError,
    UnknownTopicError,
)
from pybroker.storage.flusher import Flusher
from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig
from pybroker.storage.topic_store import TopicInfo, TopicStore, write_partition_metadata

CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
META = "meta.properties"
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

__all__ = ["LogManager", "TopicInfo"]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
    def __init__(self, log_dirs: list[Path], *, node_id: int,
                 log_config_for: Callable[[dict[str, str]], LogConfig],
                 clock_ms: Callable[[], int] = _wall_ms) -> None:
        self.dirs = [Path(d).absolute() for d in log_dirs]
        self.node_id = node_id
        self.log_config_for = log_config_for
        self.clock_ms = clock_ms
        self.cluster_id = ""
        self._locks: list[int] = []
        self._logs: dict[tuple[str, int], Log] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._flushers: dict[Path, Flusher] = {}
        self._store = TopicStore(self.dirs)

    # -- startup -----------------------------------------------------------------------------
    def startup(self) -> list[dict[str, Any]]:
        for directory in self.dirs:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock(directory)
        self.cluster_id = self._meta_properties()
        self._topics = self._store.load()
        stats = [self._load_dir(d) for d in self.dirs]
        for directory in self.dirs:
            (directory / CLEAN_SHUTDOWN).unlink(missing_ok=True)
            self._flushers[directory] = Flusher(directory.name)
        return stats

    def _lock(self, directory: Path) -> None:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirLockedError(f"log dir {directory} is in use by another broker process") from None
        self._locks.append(fd)

    def _meta_properties(self) -> str:
        cluster_id = ""
        for directory in self.dirs:
            path = directory / META
            if not path.exists():
                continue
            props = dict(line.split("=", 1) for line in path.read_text().splitlines()
                         if "=" in line and not line.startswith("#"))
            if int(props.get("node.id", self.node_id)) != self.node_id:
                raise MetaPropertiesError(f"{path} belongs to node {props['node.id']}, not {self.node_id}")
            found = props.get("cluster.id", "")
            if cluster_id and found and found != cluster_id:
                raise MetaPropertiesError(f"{path} has cluster id {found}, other dirs have {cluster_id}")
            cluster_id = cluster_id or found
        if not cluster_id:
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        for directory in self.dirs:
            path = directory / META
            if not path.exists():
                path.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={self.node_id}\n")
        return cluster_id

    def _load_dir(self, directory: Path) -> dict[str, Any]:
        started = time.monotonic()
        clean = (directory / CLEAN_SHUTDOWN).exists()
        recovery = read_checkpoint(directory / RECOVERY_POINT)
        starts = read_checkpoint(directory / LOG_START_OFFSET)
        stats: dict[str, Any] = {"log_dir": str(directory), "clean_shutdown": clean, "partitions": 0,
                                 "segments_recovered": 0, "bytes_truncated": 0}
        for child in sorted(directory.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith("-delete"):
                shutil.rmtree(child, ignore_errors=True)
                continue
            match = PARTITION_DIR.match(child.name)
            if match is None:
                continue
            topic, partition = match["topic"], int(match["partition"])
            info = self._topics.get(topic)
            if info is None or partition >= info.num_partitions:
                continue
            key = (topic, partition)
            log = Log(child, topic, partition, info.topic_id, self.log_config_for(info.configs),
                      recovery_point=recovery.get(key, 0), log_start_offset=starts.get(key, 0), clean=clean)
            self._logs[key] = log
            self._dir_of[key] = directory
            stats["partitions"] += 1
            stats["segments_recovered"] += log.stats.segments_recovered
            stats["bytes_truncated"] += log.stats.bytes_truncated
        stats["seconds"] = round(time.monotonic() - started, 3)
        return stats

    # -- topics ------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicInfo]:
        return self._topics

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str]) -> TopicInfo:
        if not LEGAL_TOPIC.match(name) or name in (".", ".."):
            raise InvalidTopicError(f"Topic name \"{name}\" is illegal")
        if name in self._topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        info = TopicInfo(name, uuid.uuid4(), 0, dict(configs))
        self._topics[name] = info
        self._grow(info, num_partitions)
        return info

    def add_partitions(self, name: str, new_total: int) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(name)
        self._grow(info, new_total)
        return info

    def _grow(self, info: TopicInfo, new_total: int) -> None:
        config = self.log_config_for(info.configs)
        for partition in range(info.num_partitions, new_total):
            directory = min(self.dirs, key=lambda d: sum(1 for v in self._dir_of.values() if v == d))
            path = directory / f"{info.name}-{partition}"
            if path.exists():
                shutil.rmtree(path)
            path.mkdir(parents=True)
            write_partition_metadata(path, info.topic_id)
            key = (info.name, partition)
            self._logs[key] = Log(path, info.name, partition, info.topic_id, config)
            self._dir_of[key] = directory
        info.num_partitions = max(info.num_partitions, new_total)
        self._store.save(self._topics)

    def delete_topic(self, name: str) -> None:
        info = self._topics.pop(name, None)
        if info is None:
            raise UnknownTopicError(name)
        self._store.save(self._topics)
        for partition in range(info.num_partitions):
            log = self._logs.pop((name, partition), None)
            self._dir_of.pop((name, partition), None)
            if log is None:
                continue
            log.close()
            doomed = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}-delete")
            log.dir.rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(name)
        info.configs = dict(configs)
        self._store.save(self._topics)
        config = self.log_config_for(info.configs)
        for partition in range(info.num_partitions):
            log = self._logs.get((name, partition))
            if log is not None:
                log.update_config(config)

    # -- durability --------------------------------------------------------------------------
    def flusher_for(self, log: Log) -> Flusher:
        return self._flushers[self._dir_of[(log.topic, log.partition)]]

    def flush_dirty(self, now_ms: int) -> None:
        """The flush policy for data not flushed by acks=all: flush.messages and flush.ms."""
        for log in list(self._logs.values()):
            if log.unflushed_messages <= 0:
                continue
            config = log.config
            if log.unflushed_messages >= config.flush_interval_messages \
                    or now_ms - log.last_flush_ms >= config.flush_interval_ms:
                log.flush()

    def checkpoint(self) -> None:
        for directory in self.dirs:
            keys = [k for k, d in self._dir_of.items() if d == directory]
            write_checkpoint(directory / RECOVERY_POINT, {k: self._logs[k].recovery_point for k in keys})
            write_checkpoint(directory / LOG_START_OFFSET, {k: self._logs[k].log_start_offset for k in keys})

    def shutdown(self) -> None:
        for flusher in self._flushers.values():
            flusher.close()
        for log in self._logs.values():
            log.flush()
            log.write_producer_snapshot()
        self.checkpoint()
        for log in self._logs.values():
            log.close()
        for directory in self.dirs:
            (directory / CLEAN_SHUTDOWN).write_text("")
        for fd in self._locks:
            os.close(fd)
        self._locks = []
