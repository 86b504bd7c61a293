"""`pybroker dump-log FILE`: a segment's batches (and with `--print-records` its records), or an index's
entries, in the words kafka-dump-log uses, so an operator reading one can read the other.

Transactions as kafka-dump-log shows them: every batch says `isTransactional` and `isControl`; a
control record prints `endTxnMarker: COMMIT coordinatorEpoch: N` (or the control type it is) instead of
its key and payload; a `.txnindex` prints one aborted transaction a line (version, producerId,
firstOffset, lastOffset, lastStableOffset); a producer `.snapshot` one entry a line, the open
transaction's first offset (`currentTxnFirstOffset`) included.

With the offsets decoder (kafka-dump-log's `--offsets-decoder`; on by default for a segment of
`__consumer_offsets`) each record's key and value are decoded from Kafka's coordinator schemas: an offset
commit (key type 0/1) or group metadata (key type 2), each as `{"type"/"version": ..., "data": {...}}`
with Kafka's field names; a tombstone's payload is null, a record of a kind we do not know keeps its bytes.
The transaction-log decoder does the same for `__transaction_state` (key type 0, the transactional id).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pybroker.protocol.member_assignment import decode_assignment
from pybroker.protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from pybroker.protocol.messages.coordinator_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from pybroker.protocol.messages.transaction_records import TransactionLogKey, TransactionLogValue
from pybroker.protocol.primitives import DecodeError, UnsupportedVersion
from pybroker.protocol.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    compute_crc,
    parse_header,
)
from pybroker.protocol.records.codecs import CODEC_NAMES
from pybroker.protocol.records.control import ABORT, COMMIT, CONTROL_TYPE_NAMES, control_type, marker_of
from pybroker.protocol.records.record import Record, RecordsError, decode_records
from pybroker.protocol.transaction_log_records import TransactionStatus
from pybroker.storage.offline import (
    OFFSET_ENTRY,
    TIME_ENTRY,
    TXN_INDEX_ENTRY,
    TXN_INDEX_ENTRY_SIZE,
    CorruptSnapshotError,
    decode_snapshot,
)

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
#: key version -> (key schema, value schema), as Kafka's coordinator records are typed
_OFFSETS_SCHEMAS: dict[int, tuple[Any, Any]] = {0: (OffsetCommitKey, OffsetCommitValue),
                                                1: (OffsetCommitKey, OffsetCommitValue),
                                                2: (GroupMetadataKey, GroupMetadataValue)}


def _text(blob: bytes | None) -> str | None:
    return None if blob is None else blob.decode("utf-8", errors="backslashreplace")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _fields(message: Any) -> dict[str, Any]:
    """A message's fields by Kafka's (camelCase) names, nested structs as dicts."""
    return {_camel(f.name): _plain(getattr(message, f.name)) for f in dataclasses.fields(message)}


def _member(member: MemberMetadata) -> dict[str, Any]:
    out = {_camel(f.name): getattr(member, f.name) for f in dataclasses.fields(member)}
    subscription = bytes(member.subscription)
    try:
        version = min(struct.unpack_from(">h", subscription)[0], ConsumerProtocolSubscription.MAX_VERSION)
        out["subscription"] = list(ConsumerProtocolSubscription.decode(subscription, version, 2, strict=False).topics)
    except (struct.error, DecodeError):
        out["subscription"] = subscription.hex()
    assigned = decode_assignment(bytes(member.assignment))
    out["assignment"] = bytes(member.assignment).hex() if assigned is None else [f"{t}-{p}" for t, p in assigned]
    return out


def decode_offsets_record(key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
    """A `__consumer_offsets` record's key and payload in Kafka's schemas (kafka-dump-log's offsets decoder)."""
    if key is None or len(key) < 2:
        return _text(key), _text(value)
    (key_version,) = struct.unpack_from(">h", key)
    key_class, value_class = _OFFSETS_SCHEMAS.get(key_version, (None, None))
    if key_class is None or value_class is None:
        return {"type": str(key_version), "data": "unknown"}, None if value is None else value.hex()
    try:
        decoded_key = {"type": str(key_version), "data": _fields(key_class.decode(key, key_version, 2))}
        if value is None:
            return decoded_key, None
        (value_version,) = struct.unpack_from(">h", value)
        message = value_class.decode(value, value_version, 2, strict=False)
    except (struct.error, DecodeError, UnsupportedVersion) as exc:
        return {"type": str(key_version), "error": str(exc)}, None if value is None else value.hex()
    data = _fields(message)
    if value_class is OffsetCommitValue:  # fields of other versions are not in the record
        if value_version != 1:
            data.pop("expireTimestamp", None)
        if value_version < 3:
            data.pop("leaderEpoch", None)
    else:  # group metadata: each member's subscription and assignment decoded too
        data["members"] = [_member(m) for m in message.members]
    return decoded_key, {"version": str(value_version), "data": data}


def decode_transaction_log_record(key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
    """A `__transaction_state` record's key and payload in Kafka's schemas (kafka-dump-log's
    `--transaction-log-decoder`); `state` names the status id as DescribeTransactions would."""
    if key is None or len(key) < 2:
        return _text(key), _text(value)
    (key_version,) = struct.unpack_from(">h", key)
    if key_version != 0:
        return {"type": str(key_version), "data": "unknown"}, None if value is None else value.hex()
    try:
        decoded_key = {"type": "0", "data": _fields(TransactionLogKey.decode(key, 0, 2))}
        if value is None:
            return decoded_key, None
        (value_version,) = struct.unpack_from(">h", value)
        decoded = TransactionLogValue.decode(value, value_version, 2, strict=False)
    except (struct.error, DecodeError, UnsupportedVersion) as exc:
        return {"type": str(key_version), "error": str(exc)}, None if value is None else value.hex()
    data = _fields(decoded)
    if value_version == 0:  # the tagged fields came with v1
        for name in ("previousProducerId", "nextProducerId", "clientTransactionVersion", "nextProducerEpoch"):
            data.pop(name, None)
    status = decoded.transaction_status
    data["state"] = TransactionStatus(status).state_name if status in TransactionStatus._value2member_map_ else None
    return decoded_key, {"version": str(value_version), "data": data}


#: the decoders kafka-dump-log has, by the internal topic whose records they read
DECODERS = {"offsets": decode_offsets_record, "transactions": decode_transaction_log_record}
DECODER_OF_TOPIC = {OFFSETS_TOPIC: "offsets", TRANSACTION_TOPIC: "transactions"}


def log_batches(path: Path, print_records: bool, decoder: str | None = None) -> Iterator[dict[str, Any]]:
    """One dict per batch; a torn or garbage tail ends the walk with an `error` entry. `decoder` (a key of
    DECODERS) decodes keys and payloads of the records (control batches' aside)."""
    decode = DECODERS[decoder] if decoder is not None else None
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER_SIZE:
            yield {"position": pos, "error": f"{len(data) - pos} trailing bytes, shorter than a batch header"}
            return
        header = parse_header(data, pos)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.batch_length + LOG_OVERHEAD > len(data):
            yield {"position": pos, "error": f"batch length {header.batch_length} runs past the end of the file"}
            return
        batch: dict[str, Any] = {
            "baseOffset": header.base_offset, "lastOffset": header.last_offset, "count": header.records_count,
            "baseSequence": header.base_sequence, "lastSequence": header.last_sequence,
            "producerId": header.producer_id, "producerEpoch": header.producer_epoch,
            "partitionLeaderEpoch": header.partition_leader_epoch, "isTransactional": header.is_transactional,
            "isControl": header.is_control, "position": pos,
            TIMESTAMP_TYPES[header.timestamp_type]: header.max_timestamp, "size": header.size,
            "magic": header.magic, "compresscodec": CODEC_NAMES.get(header.compression, str(header.compression)),
            "crcValid": compute_crc(data, pos, header) == header.crc,
        }
        if header.has_delete_horizon:
            batch["deleteHorizonMs"] = header.base_timestamp
        if print_records or decode is not None:
            try:
                batch["records"] = []
                for r in decode_records(data, pos, header):
                    record: dict[str, Any] = {
                        "offset": header.base_offset + r.offset_delta,
                        TIMESTAMP_TYPES[header.timestamp_type]: header.max_timestamp if header.timestamp_type
                        else header.base_timestamp + r.timestamp_delta,
                        "keySize": -1 if r.key is None else len(r.key),
                        "valueSize": -1 if r.value is None else len(r.value),
                        "sequence": -1 if header.base_sequence < 0 else header.base_sequence + r.offset_delta,
                        "headerKeys": [k for k, _ in r.headers]}
                    record.update(_control_fields(r) if header.is_control else _key_and_payload(r.key, r.value, decode))
                    batch["records"].append(record)
            except RecordsError as exc:
                batch["recordsError"] = str(exc)
        yield batch
        pos += header.size


def _key_and_payload(key: bytes | None, value: bytes | None,
                     decode: Callable[[bytes | None, bytes | None], tuple[Any, Any]] | None) -> dict[str, Any]:
    if decode is not None:
        decoded_key, payload = decode(key, value)
        return {"key": decoded_key, "payload": payload}
    return {"key": _text(key), "payload": _text(value)}


def _control_fields(record: Record) -> dict[str, Any]:
    """What kafka-dump-log prints for a control record: the marker, or the control type's name."""
    try:
        kind = control_type(record)
        if kind in (ABORT, COMMIT):
            marker = marker_of(record)
            return {"endTxnMarker": marker.type_name, "coordinatorEpoch": marker.coordinator_epoch}
        return {"controlType": CONTROL_TYPE_NAMES.get(kind, f"UNKNOWN({kind})")}
    except RecordsError as exc:
        return {"controlRecordError": exc.message}


def txn_index_entries(path: Path) -> Iterator[dict[str, Any]]:
    """One dict per aborted transaction of a `.txnindex`; a torn tail ends with an `error` entry."""
    data = path.read_bytes()
    whole = len(data) - len(data) % TXN_INDEX_ENTRY_SIZE
    for position in range(0, whole, TXN_INDEX_ENTRY_SIZE):
        version, producer_id, first, last, lso = TXN_INDEX_ENTRY.unpack_from(data, position)
        yield {"version": version, "producerId": producer_id, "firstOffset": first, "lastOffset": last,
               "lastStableOffset": lso}
    if whole != len(data):
        yield {"position": whole, "error": f"{len(data) - whole} trailing bytes, shorter than an entry "
                                           f"({TXN_INDEX_ENTRY_SIZE} bytes)"}


def snapshot_entries(path: Path) -> Iterator[dict[str, Any]]:
    """One dict per entry of a producer-state `.snapshot`; a damaged file gives one `error` entry."""
    try:
        rows = decode_snapshot(path.read_bytes())
    except CorruptSnapshotError as exc:
        yield {"position": 0, "error": str(exc)}
        return
    for row in rows:
        first_seq = -1 if row.last_sequence < 0 else (row.last_sequence - row.offset_delta) % 2**31
        yield {"producerId": row.producer_id, "producerEpoch": row.epoch, "coordinatorEpoch": row.coordinator_epoch,
               "currentTxnFirstOffset": row.current_txn_first_offset, "lastTimestamp": row.timestamp,
               "firstSequence": first_seq, "lastSequence": row.last_sequence, "lastOffset": row.last_offset,
               "offsetDelta": row.offset_delta}


def index_entries(path: Path) -> Iterator[dict[str, Any]]:
    base = int(path.stem)
    data = path.read_bytes()
    entry, names = (OFFSET_ENTRY, ("offset", "position")) if path.suffix == ".index" else \
        (TIME_ENTRY, ("timestamp", "offset"))
    for index in range(len(data) // entry.size):
        first, second = entry.unpack_from(data, index * entry.size)
        if index > 0 and (first, second) == (0, 0):
            return
        if path.suffix == ".index":
            yield {names[0]: base + first, names[1]: second}
        else:
            yield {names[0]: first, names[1]: base + second}


def format_batch(batch: dict[str, Any]) -> list[str]:
    if "error" in batch:
        return [f"position: {batch['position']} error: {batch['error']}"]
    fields = {k: v for k, v in batch.items() if k not in ("records", "recordsError")}
    lines = [" ".join(f"{k}: {_value(v)}" for k, v in fields.items())]
    for record in batch.get("records", []):
        lines.append("| " + " ".join(f"{k}: {_value(v)}" for k, v in record.items()))
    if "recordsError" in batch:
        lines.append(f"| records could not be decoded: {batch['recordsError']}")
    return lines


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)
