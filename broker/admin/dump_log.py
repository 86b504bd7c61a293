"""`pybroker dump-log FILE`: a segment's batches (and with `--print-records` its records), or an index's
entries, in the words kafka-dump-log uses, so an operator reading one can read the other.

Transactions as kafka-dump-log shows them: every batch says `isTransactional` and `isControl`; a
control record prints `endTxnMarker: COMMIT coordinatorEpoch: N` (or the control type it is) instead of
its key and payload; a `.txnindex` prints one aborted transaction a line (version, producerId,
firstOffset, lastOffset, lastStableOffset); a producer `.snapshot` one entry a line, the open
transaction's first offset (`currentTxnFirstOffset`) included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from pybroker.storage.errors import CorruptSnapshotError
from pybroker.storage.producer_snapshot import decode_snapshot
from pybroker.storage.transaction_index import ENTRY, ENTRY_SIZE
from pybroker.storage.verify import OFFSET_ENTRY, TIME_ENTRY

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _text(blob: bytes | None) -> str | None:
    return None if blob is None else blob.decode("utf-8", errors="backslashreplace")


def log_batches(path: Path, print_records: bool) -> Iterator[dict[str, Any]]:
    """One dict per batch; a torn or garbage tail ends the walk with an `error` entry."""
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
        if print_records:
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
                    record.update(_control_fields(r) if header.is_control
                                  else {"key": _text(r.key), "payload": _text(r.value)})
                    batch["records"].append(record)
            except RecordsError as exc:
                batch["recordsError"] = str(exc)
        yield batch
        pos += header.size


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
    whole = len(data) - len(data) % ENTRY_SIZE
    for position in range(0, whole, ENTRY_SIZE):
        version, producer_id, first, last, lso = ENTRY.unpack_from(data, position)
        yield {"version": version, "producerId": producer_id, "firstOffset": first, "lastOffset": last,
               "lastStableOffset": lso}
    if whole != len(data):
        yield {"position": whole, "error": f"{len(data) - whole} trailing bytes, shorter than an entry "
                                           f"({ENTRY_SIZE} bytes)"}


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
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)
