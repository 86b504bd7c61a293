"""Which dirs of a log dir are partitions this broker owns, and opening them at startup.

A child dir is a partition when its name is `<topic>-<partition>` (any topic text, so a topic an older
version let in with an illegal name still finds its data) and a known topic claims it: the topic exists,
the partition is below its count, no other log dir already holds it, and its `partition.metadata` (if
any) names that topic's id. A dir nobody claims is renamed `<dir>.<uuid>-stray` and left for the
operator, never deleted and never resurrected; a `-delete` dir is a deletion a crash interrupted, and is
finished. Each claimed dir opens as a `Log`: fast after a clean shutdown, recovering everything above
its recovery point after a crash.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from pybroker.storage.checkpoints import LOG_START_OFFSET, RECOVERY_POINT, read_checkpoint
from pybroker.storage.dir_names import renamed_dir_name
from pybroker.storage.log import DELETE_SUFFIX, Log
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir import had_clean_shutdown
from pybroker.storage.page_cache import PageCache
from pybroker.storage.recovery_stats import RecoveryStats
from pybroker.storage.topic_names import LEGAL_CHARS
from pybroker.storage.topic_store import TopicInfo, read_partition_metadata, write_partition_metadata

#: `<topic>-<partition>`, matched whole (`fullmatch`); any topic text, so a topic an older version let in
#: with an illegal name (say, ending in a newline) still finds its data
PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>[0-9]+)", re.DOTALL)
STRAY_SUFFIX = "-stray"
#: the dir of Kafka's KRaft metadata log
KRAFT_METADATA_DIR = "__cluster_metadata-0"
logger = structlog.get_logger("pybroker.storage.partition_dirs")


def set_aside(path: Path) -> None:
    """Rename a partition dir nobody claims to Kafka's stray form (at most 255 bytes), keeping its data."""
    path.rename(path.with_name(renamed_dir_name(path.name, STRAY_SUFFIX)))


class PartitionDirLoader:
    """Opens the partition dirs of each log dir in turn, for one startup.

    A topic's settings are resolved once for all its partitions: per partition, that was a third of the
    start of 5,000 partitions.
    """

    def __init__(self, topics: dict[str, TopicInfo], log_config_for: Callable[[dict[str, str]], LogConfig], *,
                 clock_ms: Callable[[], int], page_cache: PageCache) -> None:
        self.topics = topics
        self.log_config_for = log_config_for
        self.clock_ms = clock_ms
        self.page_cache = page_cache
        self._configs: dict[str, LogConfig] = {}

    def _config(self, info: TopicInfo) -> LogConfig:
        config = self._configs.get(info.name)
        if config is None:
            config = self._configs[info.name] = self.log_config_for(info.configs)
        return config

    def load(self, directory: Path, *, new_dir: bool, logs: dict[tuple[str, int], Log],
             dir_of: dict[tuple[str, int], Path]) -> RecoveryStats:
        """Open the partitions `directory` holds into `logs` and `dir_of` (the manager's maps: a log is in
        them as soon as it is open, so a startup that fails later closes it); a partition `logs` already
        has, from another log dir, is a stray here."""
        started = time.monotonic()
        clean = had_clean_shutdown(directory)
        recovery_points = read_checkpoint(directory / RECOVERY_POINT)
        start_offsets = read_checkpoint(directory / LOG_START_OFFSET)
        stats = RecoveryStats(str(directory), clean, new_dir)
        for child in sorted(directory.iterdir()):
            if not child.is_dir() or child.name.endswith(STRAY_SUFFIX):
                continue
            if child.name.endswith(DELETE_SUFFIX):  # a deletion that a crash interrupted
                shutil.rmtree(child, ignore_errors=True)
                continue
            if child.name == KRAFT_METADATA_DIR and "__cluster_metadata" not in self.topics:
                continue  # Kafka's metadata log, read at a takeover and never touched (storage/kraft_metadata.py)
            match = PARTITION_DIR.fullmatch(child.name)
            if match is None or not (LEGAL_CHARS.fullmatch(match["topic"]) or match["topic"] in self.topics):
                continue  # not a partition dir (an illegal name is one only if a topic has it)
            key = (match["topic"], int(match["partition"]))
            info = self.topics.get(key[0])
            owner = read_partition_metadata(child)
            if info is None or key[1] >= info.num_partitions or key in logs or owner not in (None, info.topic_id):
                set_aside(child)
                logger.warning("partition dir set aside as stray: no known topic claims it", dir=str(child))
                stats.stray_partitions += 1
                continue
            log = Log(child, key[0], key[1], info.topic_id, self._config(info),
                      recovery_point=recovery_points.get(key, 0), log_start_offset=start_offsets.get(key, 0),
                      clean=clean, clock_ms=self.clock_ms, page_cache=self.page_cache)
            if owner is None:
                write_partition_metadata(child, info.topic_id)
            logs[key] = log
            dir_of[key] = directory
            stats.partitions += 1
            stats.segments_recovered += log.load_stats.segments_recovered
            stats.bytes_truncated += log.load_stats.bytes_truncated
            stats.malformed_batches += log.load_stats.malformed_batches
        stats.seconds = round(time.monotonic() - started, 3)
        return stats
