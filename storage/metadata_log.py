"""The live KRaft metadata log: pybroker's metadata kept in `__cluster_metadata-0` as Kafka's controller keeps it.

Topics, partitions, topic and broker configs, ACLs, SCRAM users, client quotas, the producer id mark and the
feature levels are records of Kafka's metadata log (`protocol/kraft_snapshot.py` writes them). The log is a
snapshot (`<end offset>-<epoch>.checkpoint`) plus record batches in `<base offset>.log` segments after it,
every batch stamped with the leader epoch, so that Apache Kafka 4 started on the dirs replays it as its own
and pybroker's next start replays it as the metadata (`storage/log_manager.py`, `broker/live_metadata.py`).

`MetadataImage` is the replayed state keyed by record identity (a topic's id, a partition, a config's
resource and key, an ACL's content, a SCRAM user and mechanism, a quota's entity and key, a feature's name,
the producer id mark). `MetadataImage.diff` turns a new image (the stores' records) into the records that
move the log's image to it, as Kafka's controller would write them: RemoveTopicRecord for a deleted topic,
ConfigRecord with a null value for a deleted config, RemoveAccessControlEntryRecord by the ACL's id,
RemoveUserScramCredentialRecord, ClientQuotaRecord with `remove` set, and the new or changed records. Feature
levels are only ever added (pybroker does not change a level a log holds). Only the leading fields
`protocol/kraft_metadata_records.py` reads are compared, so a record Kafka wrote (a newer version, more
fields) is not written again unless what pybroker keeps of it changed.

`MetadataLog` opens the dir (newest snapshot, then the segments after it; the last segment is cut at the first
batch that is incomplete or fails its CRC, like any log's tail after a crash), appends one change as batches at
the log end, fdatasynced before `append` returns, and writes a new snapshot once the bytes appended since the
last one pass `SNAPSHOT_BYTES`, then deletes the segments and snapshots below it. Every open starts a new
segment at the log end, so pybroker never appends to a segment Kafka wrote (Kafka rebuilds a segment's
indexes, which pybroker does not write, when it recovers the log).

`LIVE_MARK` in the first log dir says the dir's metadata log is live (pybroker wrote or adopted it and goes on
from it); a dir without it (older pybroker dirs, a dir left by a one-way takeover) is upgraded by the broker,
which writes its stores' image as the first snapshot.

Called by one caller at a time (`broker/live_metadata.py` holds its lock): at startup on the startup thread,
then from whichever thread saved a store. Files are fsynced; nothing here runs on the produce or fetch path.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import structlog

from pybroker.protocol.kraft_metadata_records import MetadataRecordError, decode_record
from pybroker.protocol.kraft_snapshot import encode_metadata_record, log_batches, snapshot_bytes
from pybroker.protocol.records.batch import RecordsError, crc_ok, iter_batches
from pybroker.protocol.records.record import decode_records
from pybroker.storage.errors import StorageError
from pybroker.storage.files import atomic_write, fsync_dir
from pybroker.storage.kraft_metadata import METADATA_DIR, TOPIC_RESOURCE

log = structlog.get_logger("pybroker.storage.metadata_log").bind(logger="pybroker.storage.metadata_log")

#: in the first log dir: the metadata log in `__cluster_metadata-0` is live (its content is the metadata)
LIVE_MARK = "pybroker-metadata-log"
#: a new snapshot once this many bytes were appended since the last one (Kafka's
#: `metadata.log.max.record.bytes.between.snapshots` defaults to 20 MiB; ours is smaller, so a replay at
#: start stays short)
SNAPSHOT_BYTES = 4 << 20
#: the epoch of a log pybroker starts itself (Kafka's controller then elects itself at the next one)
FIRST_EPOCH = 1
#: the decompressed size one metadata batch may reach when read
MAX_BATCH_BYTES = 64 << 20
_SNAPSHOT = re.compile(r"(?P<offset>[0-9]{20})-(?P<epoch>[0-9]{10})\.checkpoint")
_SEGMENT = re.compile(r"(?P<offset>[0-9]{20})\.log")

Key = tuple[Any, ...]


class MetadataLogError(StorageError):
    """The metadata log cannot be opened or written."""


def _acl_content(f: dict[str, Any]) -> Key:
    return ("acl", f["resource_type"], f["resource_name"], f["pattern_type"], f["principal"], f["host"],
            f["operation"], f["permission_type"])


def _entity(f: dict[str, Any]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted((str(kind), None if name is None else str(name)) for kind, name in f["entity"]))


#: record name -> its identity in the image
_KEYS: dict[str, Any] = {
    "TopicRecord": lambda f: ("topic", f["topic_id"]),
    "PartitionRecord": lambda f: ("partition", f["topic_id"], f["partition_id"]),
    "ConfigRecord": lambda f: ("config", f["resource_type"], f["resource_name"], f["name"]),
    "FeatureLevelRecord": lambda f: ("feature", f["name"]),
    "ProducerIdsRecord": lambda f: ("producer-ids",),
    "AccessControlEntryRecord": _acl_content,
    "UserScramCredentialRecord": lambda f: ("scram", f["name"], f["mechanism"]),
    "ClientQuotaRecord": lambda f: ("quota", _entity(f), f["key"]),
}
#: what of a record is compared to tell a change (the rest of the leading fields are the key, or do not count)
_COMPARED: dict[str, Any] = {
    "ProducerIdsRecord": lambda f: f["next_producer_id"],
    "AccessControlEntryRecord": lambda f: None,  # the key is the whole content; the id is the log's own
    "FeatureLevelRecord": lambda f: None,  # never changed by pybroker
}


class MetadataImage:
    """The metadata a log holds, keyed by record identity: key -> (record name, leading fields, value bytes)."""

    def __init__(self) -> None:
        self.entries: dict[Key, tuple[str, dict[str, Any], bytes]] = {}
        self._acl_ids: dict[uuid.UUID, Key] = {}
        self._topic_names: dict[uuid.UUID, str] = {}

    @classmethod
    def of(cls, values: Sequence[bytes]) -> MetadataImage:
        image = cls()
        for value in values:
            image.apply(value)
        return image

    def apply(self, value: bytes) -> None:
        """Apply one record value; a type pybroker does not keep is skipped. Raises MetadataRecordError."""
        decoded = decode_record(value)
        if decoded is None:
            return
        name, _, f = decoded
        if name == "RemoveTopicRecord":
            self._remove_topic(f["topic_id"])
        elif name == "RemoveAccessControlEntryRecord":
            key = self._acl_ids.pop(f["id"], None)
            if key is not None:
                self.entries.pop(key, None)
        elif name == "RemoveUserScramCredentialRecord":
            self.entries.pop(("scram", f["name"], f["mechanism"]), None)
        elif (name == "ConfigRecord" and f["value"] is None) or (name == "ClientQuotaRecord" and f["remove"]):
            self.entries.pop(_KEYS[name](f), None)
        elif name in _KEYS:
            key = _KEYS[name](f)
            if name == "AccessControlEntryRecord":
                self._acl_ids[f["id"]] = key
            elif name == "TopicRecord":
                self._topic_names[f["topic_id"]] = f["name"]
            self.entries[key] = (name, f, value)

    def _remove_topic(self, topic_id: uuid.UUID) -> None:
        name = self._topic_names.pop(topic_id, None)
        for key in [k for k in self.entries if (k[0] in ("topic", "partition") and k[1] == topic_id)
                    or (k[0] == "config" and k[1] == TOPIC_RESOURCE and k[2] == name)]:
            del self.entries[key]

    def values(self) -> list[bytes]:
        """Every record value, feature levels first (metadata.version leads, as Kafka wants a snapshot)."""
        entries = list(self.entries.items())
        return ([value for key, (_, _, value) in entries if key[0] == "feature"]
                + [value for key, (_, _, value) in entries if key[0] != "feature"])

    def diff(self, new: MetadataImage) -> list[bytes]:
        """The record values that move this image to `new`: removals first, then what is new or changed."""
        out: list[bytes] = []
        removed_names = {f["name"] for key, (name, f, _) in self.entries.items()
                         if name == "TopicRecord" and key not in new.entries}
        for key, (name, f, _) in self.entries.items():
            if key in new.entries:
                continue
            if name == "TopicRecord":
                out.append(encode_metadata_record("RemoveTopicRecord", {"topic_id": f["topic_id"]}))
            elif name == "AccessControlEntryRecord":
                out.append(encode_metadata_record("RemoveAccessControlEntryRecord", {"id": f["id"]}))
            elif name == "UserScramCredentialRecord":
                out.append(encode_metadata_record("RemoveUserScramCredentialRecord",
                                                  {"name": f["name"], "mechanism": f["mechanism"]}))
            elif name == "ConfigRecord" and not (f["resource_type"] == TOPIC_RESOURCE
                                                 and f["resource_name"] in removed_names):
                out.append(encode_metadata_record("ConfigRecord", {**f, "value": None}))
            elif name == "ClientQuotaRecord":
                out.append(encode_metadata_record("ClientQuotaRecord", {**f, "value": 0.0, "remove": True}))
            # a partition goes with its topic; feature levels and the producer id mark are never removed
        for key, (name, f, value) in new.entries.items():
            old = self.entries.get(key)
            recreated = name == "ConfigRecord" and f["resource_type"] == TOPIC_RESOURCE and \
                f["resource_name"] in removed_names
            if old is not None and not recreated and _same(name, old[1], f):
                continue
            if name == "AccessControlEntryRecord":
                value = encode_metadata_record("AccessControlEntryRecord", {**f, "id": uuid.uuid4()})
            elif name == "ProducerIdsRecord" and old is not None and f["next_producer_id"] < old[1]["next_producer_id"]:
                continue  # the mark only rises
            elif name == "FeatureLevelRecord" and old is not None:
                continue
            out.append(value)
        return out


def _same(name: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    compared = _COMPARED.get(name)
    if compared is not None:
        return bool(compared(a) == compared(b))
    return a == b


def _named(directory: Path, pattern: re.Pattern[str]) -> list[tuple[int, str, Path]]:
    return sorted((int(m["offset"]), m.string, directory / m.string) for p in directory.iterdir()
                  if (m := pattern.fullmatch(p.name)))


def _epoch_of(snapshot_name: str) -> int:
    match = _SNAPSHOT.fullmatch(snapshot_name)
    return int(match["epoch"]) if match else FIRST_EPOCH


def _batches(path: Path) -> Iterator[tuple[int, int, int, bool, list[bytes] | str]]:
    """(position after it, next offset, leader epoch, CRC good, record values or why they do not decode) of
    each whole batch of a file."""
    with path.open("rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as buf:
            for pos, header in iter_batches(buf):
                good = crc_ok(buf, pos, header)
                values: list[bytes] | str = []
                if good and not header.is_control:
                    try:
                        values = [r.value for r in decode_records(buf, pos, header, MAX_BATCH_BYTES)
                                  if r.value is not None]
                    except RecordsError as exc:
                        values = str(exc)
                yield (pos + header.batch_length + 12, header.base_offset + header.last_offset_delta + 1,
                       header.partition_leader_epoch, good, values)


class MetadataLog:
    """One `__cluster_metadata-0` dir, opened for appending (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.image = MetadataImage()
        self.end_offset = 0
        self.epoch = FIRST_EPOCH
        self.bytes_since_snapshot = 0
        self.problems: list[str] = []
        self._segment: Path | None = None
        self._fd: int | None = None

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, values: Sequence[bytes], now_ms: int) -> MetadataLog:
        """A new log whose first snapshot holds `values` (an older dir is replaced whole)."""
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir()
        fsync_dir(directory.parent)
        end = len(values) + 2  # header, records, footer: the log goes on after the footer
        atomic_write(directory / f"{end:020d}-{FIRST_EPOCH:010d}.checkpoint",
                     snapshot_bytes(values, FIRST_EPOCH, now_ms))
        return cls.open(directory)

    @classmethod
    def open(cls, directory: Path) -> MetadataLog:
        """Replay the newest snapshot and the segments after it, cut a torn tail, start a segment at the end."""
        self = cls(directory)
        snapshots = _named(directory, _SNAPSHOT)
        snapshot_end = 0
        if snapshots:
            snapshot_end, name, path = snapshots[-1]
            self.epoch = _epoch_of(name)
            self._replay(path, 0, cut=False)
        self.end_offset = snapshot_end
        segments = _named(directory, _SEGMENT)
        for i, (_, _, path) in enumerate(segments):
            self._replay(path, snapshot_end, cut=i == len(segments) - 1)
        self._start_segment()
        return self

    def _replay(self, path: Path, from_offset: int, *, cut: bool) -> None:
        valid = 0
        size = path.stat().st_size
        for end_pos, next_offset, epoch, good, values in _batches(path):
            if not good:  # a torn or corrupt tail: what follows cannot be trusted to be a batch
                self.problems.append(f"{path.name} at byte {valid}: a batch fails its CRC")
                break
            if next_offset > from_offset:
                # a whole batch whose records pybroker cannot read (a record type or version of a newer
                # Kafka) is skipped, never cut: it is Kafka's to read
                if isinstance(values, str):
                    self.problems.append(f"{path.name} at byte {valid}: {values}; the batch is skipped")
                    values = []
                for value in values:
                    try:
                        self.image.apply(value)
                    except MetadataRecordError as exc:
                        self.problems.append(f"{path.name} at byte {valid}: {exc}; the record is skipped")
                self.end_offset = max(self.end_offset, next_offset)
                if epoch >= 0:
                    self.epoch = max(self.epoch, epoch)
                self.bytes_since_snapshot += end_pos - valid
            valid = end_pos
        if cut and valid < size:
            log.warning("metadata log: torn tail cut", file=path.name, kept=valid, size=size)
            with path.open("r+b") as file:
                file.truncate(valid)
                os.fsync(file.fileno())

    def _start_segment(self) -> None:
        self.close()
        path = self.directory / f"{self.end_offset:020d}.log"
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_dir(self.directory)
        self._segment = path

    # -- writing ---------------------------------------------------------------------------------
    def append(self, values: Sequence[bytes], now_ms: int) -> None:
        """Append `values` at the log end as this epoch's batches; durable (fdatasync) when it returns."""
        if not values:
            return
        if self._fd is None:
            raise MetadataLogError("the metadata log is closed")
        data = log_batches(values, self.end_offset, self.epoch, now_ms)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        os.fdatasync(self._fd)
        for value in values:
            self.image.apply(value)
        self.end_offset += len(values)
        self.bytes_since_snapshot += len(data)

    def maybe_snapshot(self, now_ms: int, bound: int = SNAPSHOT_BYTES) -> Path | None:
        """Past `bound` appended bytes: the image as a snapshot at the log end, then the segments and snapshots
        below it deleted (Kafka's controller does the same); the snapshot's path, or None."""
        if self.bytes_since_snapshot < bound:
            return None
        path = self.directory / f"{self.end_offset:020d}-{self.epoch:010d}.checkpoint"
        atomic_write(path, snapshot_bytes(self.image.values(), self.epoch, now_ms))
        self._start_segment()
        for base, _, old in _named(self.directory, _SEGMENT):
            if base < self.end_offset:
                old.unlink()
                for suffix in (".index", ".timeindex"):
                    old.with_suffix(suffix).unlink(missing_ok=True)
        for _, _, old in _named(self.directory, _SNAPSHOT)[:-1]:
            old.unlink()
        fsync_dir(self.directory)
        self.bytes_since_snapshot = 0
        return path

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def is_live(first_dir: Path) -> bool:
    return (first_dir / LIVE_MARK).exists() and (first_dir / METADATA_DIR).is_dir()


def live_metadata_dir(first_dir: Path) -> Path | None:
    """The live metadata log's dir, its torn tail cut (so what replays it next reads whole batches); None when
    the dir has no live log."""
    if not is_live(first_dir):
        return None
    MetadataLog.open(first_dir / METADATA_DIR).close()
    return first_dir / METADATA_DIR


def mark_live(first_dir: Path) -> None:
    """Durably: from now on the metadata log decides the metadata at start."""
    if not (first_dir / LIVE_MARK).exists():
        atomic_write(first_dir / LIVE_MARK, b"the metadata log in __cluster_metadata-0 is pybroker's store of record\n")
