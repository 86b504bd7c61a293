"""Writing Kafka's KRaft metadata records and a metadata snapshot (`<end offset>-<epoch>.checkpoint`) as bytes.

`protocol/kraft_metadata_records.py` reads the leading fields of the record types a takeover adopts; this
module writes whole records, every non-tagged field of the version named in `LAYOUTS`, so that Kafka's
controller replays them as its own (`pybroker export-kraft`, `broker/kraft_export.py`). A record value is
`frame version 1, record type, record version` (unsigned varints), the fields, and an empty tagged-field
section; every type here is flexible (compact strings and arrays, length + 1).

The live metadata log (`storage/metadata_log.py`) is written with `log_batches`: data batches of record
values at the log's next offsets, stamped with the leader epoch, as the controller appends them.

A snapshot is a run of record batches: a control batch holding one SnapshotHeader record (control type 3)
at offset 0, data batches holding the records from offset 1 with null keys, and a control batch holding
one SnapshotFooter record (control type 4) last, every batch stamped with the snapshot's epoch as its
partition leader epoch. That is the file Kafka 4.4's storage tool and its controller write (compared with
`kafka-dump-log --cluster-metadata-decoder` in `tests/integration/test_kraft_export.py`).

Pure; any thread may call it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from pybroker.protocol.records.record import Record, build_batch

__all__ = ["LAYOUTS", "RECORD_TYPE_IDS", "encode_metadata_record", "log_batches", "snapshot_bytes"]

#: record name -> (type id, version written, [(field, kind)]): every non-tagged field, in Kafka's order. Kinds:
#: int8/int16/int32/int64, float64, bool, uuid, string, nstring, bytes, int32s, uuids, strings (compact
#: arrays), entities (ClientQuotaRecord's compact array of {entity type, nullable entity name}).
LAYOUTS: dict[str, tuple[int, int, list[tuple[str, str]]]] = {
    "TopicRecord": (2, 0, [("name", "string"), ("topic_id", "uuid")]),
    "PartitionRecord": (3, 1, [("partition_id", "int32"), ("topic_id", "uuid"), ("replicas", "int32s"),
                               ("isr", "int32s"), ("removing_replicas", "int32s"), ("adding_replicas", "int32s"),
                               ("leader", "int32"), ("leader_epoch", "int32"), ("partition_epoch", "int32"),
                               ("directories", "uuids")]),
    "ConfigRecord": (4, 0, [("resource_type", "int8"), ("resource_name", "string"), ("name", "string"),
                            ("value", "nstring")]),
    "DelegationTokenRecord": (10, 0, [("owner", "string"), ("requester", "string"), ("renewers", "strings"),
                                      ("issue_timestamp", "int64"), ("max_timestamp", "int64"),
                                      ("expiration_timestamp", "int64"), ("token_id", "string")]),
    "UserScramCredentialRecord": (11, 0, [("name", "string"), ("mechanism", "int8"), ("salt", "bytes"),
                                          ("stored_key", "bytes"), ("server_key", "bytes"),
                                          ("iterations", "int32")]),
    "FeatureLevelRecord": (12, 0, [("name", "string"), ("feature_level", "int16")]),
    "ClientQuotaRecord": (14, 0, [("entity", "entities"), ("key", "string"), ("value", "float64"),
                                  ("remove", "bool")]),
    "ProducerIdsRecord": (15, 0, [("broker_id", "int32"), ("broker_epoch", "int64"),
                                  ("next_producer_id", "int64")]),
    "RemoveTopicRecord": (9, 0, [("topic_id", "uuid")]),
    "RemoveAccessControlEntryRecord": (19, 0, [("id", "uuid")]),
    "RemoveUserScramCredentialRecord": (22, 0, [("name", "string"), ("mechanism", "int8")]),
    "AccessControlEntryRecord": (18, 0, [("id", "uuid"), ("resource_type", "int8"), ("resource_name", "string"),
                                         ("pattern_type", "int8"), ("principal", "string"), ("host", "string"),
                                         ("operation", "int8"), ("permission_type", "int8")]),
}
RECORD_TYPE_IDS = {name: type_id for name, (type_id, _, _) in LAYOUTS.items()}

_FIXED = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
          "int64": struct.Struct(">q"), "float64": struct.Struct(">d"), "bool": struct.Struct(">?")}
_INT32 = _FIXED["int32"]
#: the control record types of a snapshot's first and last batch (Kafka's ControlRecordType)
SNAPSHOT_HEADER, SNAPSHOT_FOOTER = 3, 4
#: data records per batch: Kafka's controller writes batches of at most a few hundred records
RECORDS_PER_BATCH = 500


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact(raw: bytes) -> bytes:
    return _uvarint(len(raw) + 1) + raw


def _string(value: str | None) -> bytes:
    return b"\x00" if value is None else _compact(value.encode())


def _array(items: Sequence[bytes] | None) -> bytes:
    return b"\x00" if items is None else _uvarint(len(items) + 1) + b"".join(items)


_WRITERS: dict[str, Any] = {
    "uuid": lambda v: v.bytes,
    "string": _string,
    "nstring": _string,
    "bytes": lambda v: _compact(bytes(v)),
    "int32s": lambda v: _array(None if v is None else [_INT32.pack(i) for i in v]),
    "uuids": lambda v: _array([u.bytes for u in v]),
    "strings": lambda v: _array([_string(s) for s in v]),
    # each entity is a struct with its own (empty) tagged-field section
    "entities": lambda v: _array([_string(kind) + _string(name) + b"\x00" for kind, name in v]),
}


def _field(kind: str, value: Any) -> bytes:
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed.pack(value)
    if value is None and kind not in ("nstring", "int32s"):
        raise ValueError(f"null where a {kind} must be")
    out: bytes = _WRITERS[kind](value)
    return out


def encode_metadata_record(name: str, fields: dict[str, Any]) -> bytes:
    """The value of one metadata record: frame version 1, type, version, every field of `LAYOUTS[name]`,
    an empty tagged-field section. Raises KeyError for a field the caller left out."""
    type_id, version, layout = LAYOUTS[name]
    body = b"".join(_field(kind, fields[field]) for field, kind in layout)
    return _uvarint(1) + _uvarint(type_id) + _uvarint(version) + body + b"\x00"


def _control(record_type: int, value: bytes, offset: int, epoch: int, timestamp_ms: int) -> bytes:
    key = struct.pack(">hh", 0, record_type)
    return build_batch([Record(0, 0, key, value)], base_offset=offset, base_timestamp=timestamp_ms,
                       is_control=True, partition_leader_epoch=epoch)


def snapshot_bytes(values: Sequence[bytes], epoch: int, timestamp_ms: int) -> bytes:
    """A whole snapshot file: header batch, the record values in batches of `RECORDS_PER_BATCH`, footer batch.

    The header's last contained log timestamp and every batch's timestamp are `timestamp_ms`; the offsets run
    from 0 (the header) to `len(values) + 1` (the footer)."""
    # SnapshotHeaderRecord v0: int16 version, int64 last contained log timestamp, tagged fields
    out = [_control(SNAPSHOT_HEADER, struct.pack(">hq", 0, timestamp_ms) + b"\x00", 0, epoch, timestamp_ms)]
    for start in range(0, len(values), RECORDS_PER_BATCH):
        chunk = values[start:start + RECORDS_PER_BATCH]
        out.append(build_batch([Record(i, 0, None, value) for i, value in enumerate(chunk)], base_offset=1 + start,
                               base_timestamp=timestamp_ms, partition_leader_epoch=epoch))
    # SnapshotFooterRecord v0: int16 version, tagged fields
    out.append(_control(SNAPSHOT_FOOTER, struct.pack(">h", 0) + b"\x00", len(values) + 1, epoch, timestamp_ms))
    return b"".join(out)



def log_batches(values: Sequence[bytes], base_offset: int, epoch: int, timestamp_ms: int) -> bytes:
    """Data batches of the metadata log holding `values` from `base_offset` (null keys, at most
    `RECORDS_PER_BATCH` records each), every batch stamped with `epoch` as its partition leader epoch."""
    out = []
    for start in range(0, len(values), RECORDS_PER_BATCH):
        chunk = values[start:start + RECORDS_PER_BATCH]
        out.append(build_batch([Record(i, 0, None, value) for i, value in enumerate(chunk)],
                               base_offset=base_offset + start, base_timestamp=timestamp_ms,
                               partition_leader_epoch=epoch))
    return b"".join(out)
