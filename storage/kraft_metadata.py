"""Reading a KRaft metadata log: a stopped Apache Kafka 4 node's, to take its dir over, or pybroker's live one at start.

Kafka keeps its topics, partitions and configs in `__cluster_metadata-0`: snapshots
(`<end offset>-<epoch>.checkpoint`, record batches between a SnapshotHeader and a SnapshotFooter control
batch) and log segments (`<base offset>.log`). The image is the newest readable snapshot plus every
record of the log at or after its end offset, applied in order. pybroker reads it at its first start on a
dir Kafka left (no `pybroker-topics.json` anywhere yet), and at every start on a dir whose metadata log is live
(`storage/metadata_log.py`: pybroker's own store of record, which Kafka may have appended to since); the
result replaces pybroker's topic table, a view of the log.

Records applied: TopicRecord, PartitionRecord, RemoveTopicRecord, ConfigRecord (topic and broker
resources), ProducerIdsRecord, AccessControlEntryRecord and its removal, UserScramCredentialRecord and its
removal, ClientQuotaRecord. The ACLs, SCRAM credentials, client quotas and dynamic broker configs are kept in the image for the broker layer to
store (`broker/kraft_takeover.py`); storage does not know their formats or which keys are valid. Control batches and record types pybroker does not adopt are skipped.
A batch that does not decode ends the read of that file (the tail a crash cut, as Kafka's own recovery
would), logged by the caller via `KraftImage.problems`.

Runs on the startup thread, before the event loop starts; reads files only.
"""

from __future__ import annotations

import mmap
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from pybroker.protocol.kraft_metadata_records import MetadataRecordError, decode_record
from pybroker.protocol.records.batch import RecordsError, iter_batches
from pybroker.protocol.records.record import decode_records
from pybroker.storage.files import atomic_write
from pybroker.storage.producer_id_block import FILE_NAME as PRODUCER_ID_FILE
from pybroker.storage.topic_store import TopicInfo

log = structlog.get_logger("pybroker.storage.kraft_metadata").bind(logger="pybroker.storage.kraft_metadata")

METADATA_DIR = "__cluster_metadata-0"
_SNAPSHOT = re.compile(r"(?P<offset>[0-9]{20})-(?P<epoch>[0-9]{10})\.checkpoint")
_SEGMENT = re.compile(r"(?P<offset>[0-9]{20})\.log")
#: Kafka's ConfigResource types in ConfigRecord
TOPIC_RESOURCE, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 16, 32
#: the decompressed size one metadata batch may reach
MAX_BATCH_BYTES = 64 << 20


@dataclass
class KraftImage:
    """What the metadata says, after replay."""

    #: topic id -> name
    names: dict[uuid.UUID, str] = field(default_factory=dict)
    #: topic id -> partition ids
    partitions: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    #: (resource type, resource name) -> config overrides
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    #: the next producer id Kafka's controller would hand out (0 when no block was ever handed out)
    next_producer_id: int = 0
    #: ACL id -> the AccessControlEntryRecord's fields (Kafka's codes)
    acls: dict[uuid.UUID, dict[str, Any]] = field(default_factory=dict)
    #: (user, mechanism code) -> the UserScramCredentialRecord's fields (secrets: never log them)
    scram: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    #: client quota entity ((entity type, name or None for the default), ...) -> key -> value
    quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(default_factory=dict)
    #: what could not be read, for the log
    problems: list[str] = field(default_factory=list)
    #: records applied, for the log
    records: int = 0
    #: the `__cluster_metadata-0` dir it was read from
    source: Path | None = None

    def apply(self, name: str, fields: dict[str, Any]) -> None:
        handler = _APPLY.get(name)
        if handler is not None:
            handler(self, fields)
            self.records += 1

    def topics(self) -> dict[str, TopicInfo]:
        """The topics as pybroker's topic table holds them: Kafka's ids, counts and topic configs.

        A topic's partition count is its highest partition id + 1 (Kafka numbers them densely)."""
        out = {}
        for topic_id, name in self.names.items():
            parts = self.partitions.get(topic_id)
            if not parts:
                continue
            configs = dict(self.configs.get((TOPIC_RESOURCE, name), {}))
            out[name] = TopicInfo(name, topic_id, max(parts) + 1, configs)
        return out

    def broker_configs(self, resource_name: str) -> dict[str, str]:
        """One layer of dynamic broker configs: this node's (its id) or the cluster-wide default ("")."""
        return dict(self.configs.get((BROKER_RESOURCE, resource_name), {}))


def _topic(image: KraftImage, f: dict[str, Any]) -> None:
    image.names[f["topic_id"]] = str(f["name"])


def _partition(image: KraftImage, f: dict[str, Any]) -> None:
    image.partitions.setdefault(f["topic_id"], set()).add(int(f["partition_id"]))


def _remove_topic(image: KraftImage, f: dict[str, Any]) -> None:
    name = image.names.pop(f["topic_id"], None)
    image.partitions.pop(f["topic_id"], None)
    if name is not None:
        image.configs.pop((TOPIC_RESOURCE, name), None)


def _config(image: KraftImage, f: dict[str, Any]) -> None:
    key = (int(f["resource_type"]), str(f["resource_name"]))
    configs = image.configs.setdefault(key, {})
    if f["value"] is None:  # a deletion
        configs.pop(str(f["name"]), None)
    else:
        configs[str(f["name"])] = str(f["value"])


def _producer_ids(image: KraftImage, f: dict[str, Any]) -> None:
    image.next_producer_id = max(image.next_producer_id, int(f["next_producer_id"]))


def _acl(image: KraftImage, f: dict[str, Any]) -> None:
    image.acls[f["id"]] = f


def _remove_acl(image: KraftImage, f: dict[str, Any]) -> None:
    image.acls.pop(f["id"], None)


def _scram(image: KraftImage, f: dict[str, Any]) -> None:
    image.scram[str(f["name"]), int(f["mechanism"])] = f


def _remove_scram(image: KraftImage, f: dict[str, Any]) -> None:
    image.scram.pop((str(f["name"]), int(f["mechanism"])), None)


def _quota(image: KraftImage, f: dict[str, Any]) -> None:
    entity = tuple(sorted((str(kind), None if name is None else str(name)) for kind, name in f["entity"]))
    values = image.quotas.setdefault(entity, {})
    if f["remove"]:
        values.pop(str(f["key"]), None)
        if not values:
            image.quotas.pop(entity, None)
    else:
        values[str(f["key"])] = float(f["value"])


_APPLY = {"TopicRecord": _topic, "PartitionRecord": _partition, "RemoveTopicRecord": _remove_topic,
          "ConfigRecord": _config, "ProducerIdsRecord": _producer_ids, "AccessControlEntryRecord": _acl,
          "RemoveAccessControlEntryRecord": _remove_acl, "UserScramCredentialRecord": _scram,
          "RemoveUserScramCredentialRecord": _remove_scram, "ClientQuotaRecord": _quota}


def has_kraft_metadata(log_dir: Path) -> bool:
    return (log_dir / METADATA_DIR).is_dir()


def _replay_file(image: KraftImage, path: Path, from_offset: int) -> int:
    """Apply the records of one file at or above `from_offset`; returns the offset after the last one read.

    The file is mapped, not read: a metadata segment may be as large as a gigabyte, and only one batch at
    a time (decompressed under `MAX_BATCH_BYTES`) is ever held."""
    next_offset = from_offset
    with path.open("rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            return next_offset
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as buf:
            for pos, header in iter_batches(buf):
                last = header.base_offset + header.last_offset_delta
                if header.is_control or last < from_offset:
                    next_offset = max(next_offset, last + 1)
                    continue
                try:
                    for record in decode_records(buf, pos, header, MAX_BATCH_BYTES):
                        offset = header.base_offset + record.offset_delta
                        if offset < from_offset or record.value is None:
                            continue
                        decoded = decode_record(record.value)
                        if decoded is not None:
                            image.apply(decoded[0], decoded[2])
                except (RecordsError, MetadataRecordError) as exc:
                    image.problems.append(f"{path.name} at byte {pos}: {exc}; the rest of the file is not read")
                    break
                next_offset = max(next_offset, last + 1)
    return next_offset


def read_kraft_metadata(log_dir: Path) -> KraftImage:
    """The metadata image of the `__cluster_metadata-0` under `log_dir`: newest snapshot, then the log."""
    return _read_metadata_dir(log_dir / METADATA_DIR)


def _read_metadata_dir(directory: Path) -> KraftImage:
    image = KraftImage()
    snapshots = sorted((int(m["offset"]), m.string) for p in directory.iterdir()
                       if (m := _SNAPSHOT.fullmatch(p.name)))
    segments = sorted((int(m["offset"]), m.string) for p in directory.iterdir()
                      if (m := _SEGMENT.fullmatch(p.name)))
    snapshot_end = 0
    if snapshots:
        snapshot_end, name = snapshots[-1]
        _replay_file(image, directory / name, 0)
    for _, name in segments:
        _replay_file(image, directory / name, snapshot_end)
    return image


def adopt_kraft_metadata(dirs: list[Path], metadata_dir: Path | None = None) -> KraftImage | None:
    """The image of the first log dir holding Kafka's metadata log (or of `metadata_dir`, the one a Kafka node
    wrote into after pybroker's export); None when there is none.

    Also carries Kafka's producer id high-water mark into pybroker's `producer-id-block` (first log dir),
    so no producer id Kafka handed out is handed out again. The caller saves the topic table (pybroker's
    store of record from then on); the broker layer stores the ACLs, SCRAM users and dynamic broker configs.
    """
    if metadata_dir is None:
        found = next((d for d in dirs if has_kraft_metadata(d)), None)
        if found is None:
            return None
        metadata_dir = found / METADATA_DIR
    source = metadata_dir.parent
    image = _read_metadata_dir(metadata_dir)
    image.source = metadata_dir
    for problem in image.problems:
        log.warning("Kafka metadata log: unreadable part skipped", problem=problem)
    topics = image.topics()
    if image.next_producer_id:
        block = dirs[0] / PRODUCER_ID_FILE
        try:
            ours: int | None = int(block.read_text().strip() or 0)
        except FileNotFoundError:
            ours = -1
        except (OSError, ValueError):
            ours = None  # a corrupt file is left for ProducerIdBlock to refuse, with its name
        if ours is not None and image.next_producer_id > ours:
            atomic_write(block, str(image.next_producer_id).encode())
    log.info("took over Apache Kafka's metadata log", log_dir=str(source), topics=len(topics),
             acls=len(image.acls), scram_credentials=len(image.scram), records=image.records,
             next_producer_id=image.next_producer_id)
    return image
