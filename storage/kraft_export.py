"""Writing a stopped pybroker's metadata as a KRaft metadata snapshot, so Apache Kafka 4 can take its log dirs over.

Kafka keeps topics, partitions, configs, ACLs, SCRAM users, quotas and producer id blocks in its metadata log
(`__cluster_metadata-0`); so does pybroker (`storage/metadata_log.py`), with its JSON stores
(`pybroker-topics.json`, `producer-id-block`, the broker's stores) as a view of it. `image_values` is also the
live log's image of the stores (`broker/live_metadata.py`). `export_kraft_snapshot` writes what those stores hold as one snapshot,
`__cluster_metadata-0/<end offset>-<epoch>.checkpoint`, the file a Kafka controller loads at start as the
newest image before it replays its log (which is empty: there is no log segment, no `quorum-state`, so the
controller elects itself at the next epoch and goes on from the snapshot's end offset). Kafka 4.4 loads such a
snapshot it did not write (`tests/integration/test_kraft_export.py`).

The image: the feature levels of Kafka 4.4's `kafka-storage format` (metadata.version first, as Kafka wants
it), one TopicRecord, the topic's ConfigRecords and one PartitionRecord per partition (the one replica, in ISR
and leading, on the log dir whose `directory.id` holds the partition's dir), the ProducerIdsRecord carrying
`producer-id-block`'s mark (no producer id is handed out twice), then whatever records the caller adds (the
broker's ACLs, SCRAM credentials, quotas and dynamic broker configs: storage does not know their stores).

The snapshot goes to the first log dir by default, as a combined Kafka node (broker and controller) reads it;
or to a separate metadata dir for a controller-only node, which gets its own `meta.properties`. An older
`__cluster_metadata-0` (one Kafka left there before pybroker took the dir over) is replaced whole: its
content was adopted at that takeover, and what it says now is stale.

The export leaves a mark in the first log dir, `pybroker-kraft-export`, naming the snapshot (relative to the
first log dir when it lies in it, so the dirs may move). At the next start `kafka_ran_since_export` tells
whether Kafka wrote into the metadata dir since; if so the broker takes Kafka's metadata back in place of its
own stores, then `forget_export` removes the mark.

Offline: runs in the `pybroker export-kraft` process while no broker holds the dirs (the caller takes their
locks). Files are written atomically and fsynced (`storage/files.py`).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pybroker.protocol.kraft_snapshot import encode_metadata_record, snapshot_bytes
from pybroker.storage.errors import StorageError
from pybroker.storage.files import atomic_write, fsync_dir
from pybroker.storage.kraft_metadata import METADATA_DIR, TOPIC_RESOURCE
from pybroker.storage.log_dir import META_PROPERTIES, new_kafka_id, read_meta_properties
from pybroker.storage.producer_id_block import FILE_NAME as PRODUCER_ID_FILE
from pybroker.storage.topic_store import TopicInfo, TopicStore, parse_kafka_uuid

#: the feature levels Kafka 4.4's `kafka-storage format` finalizes (metadata.version 4.4-IV0 is level 33)
FEATURE_LEVELS = (("metadata.version", 33), ("eligible.leader.replicas.version", 1), ("group.version", 1),
                  ("share.version", 2), ("streams.version", 1), ("transaction.version", 2))
#: the snapshot's epoch: the controller's first election after the export runs at epoch 2
SNAPSHOT_EPOCH = 1
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
#: in the first log dir: the path of the last exported snapshot. Kafka never reads it (a file, not a partition
#: dir); pybroker's next start compares the metadata dir with it to see whether Kafka ran on the dirs since
EXPORT_MARK = "pybroker-kraft-export"


class ExportError(StorageError):
    """The dirs cannot be exported (no meta.properties, no directory.id, dirs of different clusters)."""


@dataclass(frozen=True)
class ExportResult:
    snapshot: Path
    cluster_id: str
    topics: int
    partitions: int
    records: int


def node_of(dirs: Sequence[Path], node_id: int | None) -> int:
    """`node_id`, checked against the dirs' meta.properties; what they say when it is None."""
    for directory in dirs:
        props = read_meta_properties(directory) or {}
        found = props.get("node.id")
        if found is None:
            continue
        if node_id is not None and found != str(node_id):
            raise ExportError(f"{directory / META_PROPERTIES} belongs to node.id={found}, not {node_id}")
        return int(found)
    raise ExportError(f"no meta.properties with a node.id in {', '.join(map(str, dirs))}: "
                      "start pybroker on the dirs once first")


def dir_identity(dirs: Sequence[Path]) -> tuple[str, dict[Path, str]]:
    """The cluster id and each log dir's directory.id, from meta.properties version 1."""
    cluster_id, ids = "", {}
    for directory in dirs:
        props = read_meta_properties(directory)
        if props is None or props.get("version") != "1" or not props.get("directory.id"):
            raise ExportError(f"{directory / META_PROPERTIES} is missing or not version 1 with a directory.id: "
                              "start pybroker on the dir once first")
        if cluster_id and props.get("cluster.id") != cluster_id:
            raise ExportError(f"{directory} belongs to cluster {props.get('cluster.id')}, not {cluster_id}")
        cluster_id = props.get("cluster.id", "")
        ids[directory] = props["directory.id"]
    return cluster_id, ids


def _leader_epoch(partition_dir: Path) -> int:
    """The newest epoch in a partition's `leader-epoch-checkpoint` (Kafka's, kept from before a takeover), else 0.

    The exported leader epoch must not be older than what the partition's batches already carry."""
    try:
        lines = (partition_dir / LEADER_EPOCH_FILE).read_text().split("\n")
        return max((int(line.split()[0]) for line in lines[2:] if line.strip()), default=0)
    except (OSError, ValueError, UnicodeDecodeError):
        return 0


def _home(dirs: Sequence[Path], ids: dict[Path, str], topic: str, partition: int) -> tuple[str, int]:
    """(directory.id, leader epoch) of the log dir holding the partition (the first dir if none does)."""
    for directory in dirs:
        path = directory / f"{topic}-{partition}"
        if path.is_dir():
            return ids[directory], _leader_epoch(path)
    return ids[dirs[0]], 0


def image_values(dirs: Sequence[Path], ids: dict[Path, str], node_id: int, topics: dict[str, TopicInfo],
                 next_producer_id: int,
                 known: Callable[[uuid.UUID, int], bool] | None = None) -> tuple[list[bytes], int]:
    """The record values of the topic part of the image, and how many partitions it names.

    A partition for which `known(topic id, partition)` is true (the caller holds its record already) gets the first
    dir and epoch 0 without a look at the disk: the live log's diff compares only a partition's identity and
    replicas, and keeps the record it has."""
    values = [encode_metadata_record("FeatureLevelRecord", {"name": name, "feature_level": level})
              for name, level in FEATURE_LEVELS]
    partitions = 0
    for topic in sorted(topics.values(), key=lambda t: t.name):
        values.append(encode_metadata_record("TopicRecord", {"name": topic.name, "topic_id": topic.topic_id}))
        values += [encode_metadata_record("ConfigRecord", {"resource_type": TOPIC_RESOURCE, "resource_name": topic.name,
                                                           "name": key, "value": value})
                   for key, value in sorted(topic.configs.items())]
        for partition in range(topic.num_partitions):
            if known is not None and known(topic.topic_id, partition):
                directory_id, epoch = ids[dirs[0]], 0
            else:
                directory_id, epoch = _home(dirs, ids, topic.name, partition)
            values.append(encode_metadata_record("PartitionRecord", {
                "partition_id": partition, "topic_id": topic.topic_id, "replicas": [node_id], "isr": [node_id],
                "removing_replicas": [], "adding_replicas": [], "leader": node_id, "leader_epoch": epoch,
                "partition_epoch": 0, "directories": [parse_kafka_uuid(directory_id)]}))
            partitions += 1
    if next_producer_id:
        values.append(encode_metadata_record("ProducerIdsRecord", {
            "broker_id": node_id, "broker_epoch": -1, "next_producer_id": next_producer_id}))
    return values, partitions


def next_producer_id_mark(first_dir: Path) -> int:
    try:
        return int((first_dir / PRODUCER_ID_FILE).read_text().strip() or 0)
    except FileNotFoundError:
        return 0
    except ValueError:
        raise ExportError(f"{first_dir / PRODUCER_ID_FILE} is corrupt") from None


def _metadata_home(metadata_dir: Path, cluster_id: str, controller_id: int) -> None:
    """A separate metadata dir gets its own meta.properties (the controller's node id), once."""
    metadata_dir.mkdir(parents=True, exist_ok=True)
    props = read_meta_properties(metadata_dir)
    if props is None:
        text = (f"#\nversion=1\ncluster.id={cluster_id}\nnode.id={controller_id}\n"
                f"directory.id={new_kafka_id()}\n")
        atomic_write(metadata_dir / META_PROPERTIES, text.encode())
        fsync_dir(metadata_dir.parent)
    elif props.get("cluster.id") != cluster_id or props.get("node.id") != str(controller_id):
        raise ExportError(f"{metadata_dir / META_PROPERTIES} belongs to node.id={props.get('node.id')} of cluster "
                          f"{props.get('cluster.id')}, not to node.id={controller_id} of {cluster_id}")


def kafka_ran_since_export(first_dir: Path) -> Path | None:
    """The metadata dir Kafka wrote into after pybroker's last export, or None (no export, or Kafka never ran).

    The export leaves its snapshot alone in the dir; a Kafka node that ran on it wrote its `quorum-state` and
    log segments there (or removed the exported snapshot)."""
    try:
        exported = first_dir / (first_dir / EXPORT_MARK).read_text().strip()  # an absolute path stays itself
    except (OSError, UnicodeDecodeError):
        return None
    directory = exported.parent
    if not directory.is_dir():
        return None
    names = {p.name for p in directory.iterdir()}
    if names == {exported.name}:
        return None
    return directory


def forget_export(first_dir: Path) -> None:
    """The export's mark is removed once pybroker took the metadata back (durably: the next start must not
    take it back again over what pybroker changed since)."""
    mark = first_dir / EXPORT_MARK
    if mark.exists():
        mark.unlink()
        fsync_dir(first_dir)


def export_kraft_snapshot(dirs: Sequence[Path], node_id: int, extra: Sequence[bytes], now_ms: int,
                          metadata_dir: Path | None = None, controller_id: int | None = None) -> ExportResult:
    """Write the image of pybroker's stores in `dirs` (plus the `extra` record values) as a metadata snapshot.

    `metadata_dir` (with `controller_id`) puts it in a controller-only node's dir instead of the first log
    dir. The caller holds the log dirs' locks."""
    dirs = list(dirs)
    cluster_id, ids = dir_identity(dirs)
    node_of(dirs, node_id)
    topics = TopicStore(dirs).load()
    values, partitions = image_values(dirs, ids, node_id, topics, next_producer_id_mark(dirs[0]))
    values += extra
    home = dirs[0]
    if metadata_dir is not None and metadata_dir.resolve() != dirs[0].resolve():
        _metadata_home(metadata_dir, cluster_id, node_id if controller_id is None else controller_id)
        home = metadata_dir
    target = home / METADATA_DIR
    if target.exists():
        shutil.rmtree(target)
    target.mkdir()
    fsync_dir(home)
    # the end offset is the offset after the footer: the log the controller starts goes on from there
    end_offset = len(values) + 2
    snapshot = target / f"{end_offset:020d}-{SNAPSHOT_EPOCH:010d}.checkpoint"
    atomic_write(snapshot, snapshot_bytes(values, SNAPSHOT_EPOCH, now_ms))
    named = snapshot.relative_to(dirs[0]) if home == dirs[0] else snapshot.resolve()
    atomic_write(dirs[0] / EXPORT_MARK, f"{named}\n".encode())
    return ExportResult(snapshot, cluster_id, len(topics), partitions, len(values))
