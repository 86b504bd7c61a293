"""Every metadata change pybroker makes, appended to its live KRaft metadata log before the change is answered.

The one hook: the stores of metadata (`pybroker-topics.json`, `pybroker-dynamic-configs.json`,
`producer-id-block`, `pybroker-acls.json`, `scram-credentials.json`, `client-quotas.json`,
`pybroker-group-configs.json`, in the first log dir) are all replaced through `storage/files.py`'s
`atomic_write`, which calls `LiveMetadata.commit` once a watched file is durable, on the saver's thread and before the saver returns (so before CreateTopics,
DeleteTopics, CreatePartitions, AlterConfigs, CreateAcls, DeleteAcls, AlterUserScramCredentials,
AlterClientQuotas, an auto-creation or a new producer id block is answered). `commit` builds the image of
the stores as KRaft records (the export's image: `storage/kraft_export.py`'s `image_values` and
`broker/kraft_export.py`'s `security_values`), diffs it with the log's image by record identity
(`storage/metadata_log.py`), and appends the difference as one change, fdatasynced. A failure raises to the
saver, whose request then fails: nothing is answered that the log lacks.

At start (`broker/state.py`), after the stores were rewritten from the log (`storage/log_manager.py` replays
a live log with `replace`, as a takeover), `open` goes on from the log, or, for a dir without a live log
(an older pybroker's, or one taken over one way from Kafka before), writes the stores' image as its first
snapshot. A dir Kafka served is gone on from: its log is appended to at Kafka's last leader epoch.

Group configs (share groups' `pybroker-group-configs.json`, streams groups'
`pybroker-streams-group-configs.json`) are in it as one ConfigRecord set of resource type GROUP per group, and
client-metrics subscriptions (`client-metrics.json`) as ConfigRecords of resource type CLIENT_METRICS, as Kafka
keeps them. Building the image reads every store: a change costs
O(metadata), fine for the topic and ACL counts a single broker holds. The topic part (every topic and partition) is rebuilt only when the
topic table changed, so the changes saved on the event loop (ACLs, dynamic broker configs, a producer id block)
rebuild only the small part.

`commit` may be called from any thread (a lock serialises it); `open` and `close` from the startup and
shutdown code only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from pybroker.broker.kraft_export import security_values
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.security.acl_store import FILE_NAME as ACL_FILE
from pybroker.broker.security.quota_store import FILE_NAME as QUOTA_FILE
from pybroker.broker.security.scram_store import FILE_NAME as SCRAM_FILE
from pybroker.broker.share.group_configs import FILE_NAME as GROUP_CONFIGS_FILE
from pybroker.broker.streams_groups.group_configs import FILE_NAME as STREAMS_GROUP_CONFIGS_FILE
from pybroker.broker.telemetry.subscriptions import FILE_NAME as CLIENT_METRICS_FILE
from pybroker.protocol.kraft_snapshot import encode_metadata_record
from pybroker.storage.dynamic_config_store import FILE_NAME as DYNAMIC_CONFIG_FILE
from pybroker.storage.files import unwatch_replacements, watch_replacements
from pybroker.storage.kraft_export import dir_identity, forget_export, image_values, next_producer_id_mark
from pybroker.storage.kraft_metadata import METADATA_DIR
from pybroker.storage.metadata_log import MetadataImage, MetadataLog, is_live, mark_live
from pybroker.storage.producer_id_block import FILE_NAME as PRODUCER_ID_FILE
from pybroker.storage.topic_store import FILE_NAME as TOPIC_FILE
from pybroker.storage.topic_store import TopicStore

log = get_logger("pybroker.live_metadata")

#: the stores whose replacement is a metadata change (in the first log dir)
WATCHED = (TOPIC_FILE, DYNAMIC_CONFIG_FILE, PRODUCER_ID_FILE, ACL_FILE, SCRAM_FILE, QUOTA_FILE, GROUP_CONFIGS_FILE,
           STREAMS_GROUP_CONFIGS_FILE, CLIENT_METRICS_FILE)


class LiveMetadata:
    def __init__(self, dirs: list[Path], node_id: int, clock_ms: Callable[[], int]) -> None:
        self.dirs = dirs
        self.node_id = node_id
        self.clock_ms = clock_ms
        self.log: MetadataLog | None = None
        self._lock = threading.Lock()
        self._ids: dict[Path, str] = {}
        self._watched = [dirs[0] / name for name in WATCHED]
        #: the topic part of the stores' image, with the stamp of the topic table copies it was built from
        self._topics_cache: tuple[tuple[tuple[int, int, int] | None, ...], MetadataImage] | None = None

    def _store_values(self) -> list[bytes]:
        """The stores' image as record values (ACL ids are placeholders: the diff gives new ACLs fresh ids)."""
        return [*self._topic_part().values(), *self._other_part().values()]

    def _stamp(self, paths: list[Path]) -> tuple[tuple[int, int, int] | None, ...]:
        """What tells a store changed: `atomic_write` replaces a file, so its inode, time and size change."""
        out: list[tuple[int, int, int] | None] = []
        for path in paths:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                out.append(None)
                continue
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def _topic_part(self) -> MetadataImage:
        """Feature levels, topics, their configs and partitions: rebuilt only when a copy of the topic table
        changed (a change of an ACL, user, quota, broker config or the producer id mark does not pay for it)."""
        stamp = self._stamp([d / TOPIC_FILE for d in self.dirs])
        if self._topics_cache is None or self._topics_cache[0] != stamp:
            entries = self.log.image.entries if self.log is not None else {}
            values, _ = image_values(self.dirs, self._ids, self.node_id, TopicStore(self.dirs).load(), 0,
                                     known=lambda topic_id, partition: ("partition", topic_id, partition) in entries)
            self._topics_cache = (stamp, MetadataImage.of(values))
        return self._topics_cache[1]

    def _other_part(self) -> MetadataImage:
        """The producer id mark, ACLs, SCRAM users, quotas and dynamic broker configs (small: rebuilt each time)."""
        first = self.dirs[0]
        values = [v for kind in security_values(first, self.node_id).values() for v in kind]
        mark = next_producer_id_mark(first)
        if mark:
            values.append(encode_metadata_record("ProducerIdsRecord", {
                "broker_id": self.node_id, "broker_epoch": -1, "next_producer_id": mark}))
        return MetadataImage.of(values)

    def _image(self) -> MetadataImage:
        image = MetadataImage()
        image.entries = {**self._topic_part().entries, **self._other_part().entries}
        return image

    def open(self, kafka_log: Path | None) -> None:
        """Go on from the first log dir's live log (or from `kafka_log`, Kafka's log this start adopted, when it
        is the first log dir's), else start one with the stores' image; then watch the stores."""
        first = self.dirs[0]
        _, self._ids = dir_identity(self.dirs)
        directory = first / METADATA_DIR
        go_on = is_live(first) or (kafka_log is not None and kafka_log.resolve() == directory.resolve())
        with self._lock:
            if go_on:
                self.log = MetadataLog.open(directory)
                for problem in self.log.problems:
                    log.warning("metadata log: unreadable part skipped", problem=problem)
                self._append_difference()
            else:
                self.log = MetadataLog.create(directory, self._store_values(), self.clock_ms())
                forget_export(first)  # the exported snapshot is gone with the old dir
            mark_live(first)
        watch_replacements(self._watched, self.commit)
        log.info("metadata log live", end_offset=self.log.end_offset, epoch=self.log.epoch, went_on=go_on)

    def commit(self) -> None:
        """Append what the stores changed since the log's image, durably; maybe write a snapshot."""
        with self._lock:
            self._append_difference()

    def _append_difference(self) -> None:
        if self.log is None:
            return
        now = self.clock_ms()
        self.log.append(self.log.image.diff(self._image()), now)
        self.log.maybe_snapshot(now)

    def close(self) -> None:
        unwatch_replacements(self._watched)
        with self._lock:
            if self.log is not None:
                self.log.close()
                self.log = None
