"""Transaction markers: the control batches that end a transaction in a partition (Kafka's format).

The transaction coordinator writes one COMMIT or ABORT marker into every partition of a transaction; a
read_committed consumer learns from them where a transaction's records end. Kafka's layout
(`EndTransactionMarker`, `ControlRecordType`):

- one v2 batch, attributes transactional | control, the producer's id and epoch, base sequence -1;
- one record, offset delta 0, whose key is `version int16 (0), type int16 (0 ABORT, 1 COMMIT)` and
  whose value is `version int16 (0), coordinator_epoch int32`.

Readers accept a newer key/value version as Kafka does (the fields they know come first) and refuse a
record too short to hold them.
"""

from __future__ import annotations

from struct import Struct
from typing import NamedTuple

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import BatchHeader, Buffer, RecordsError
from pybroker.protocol.records.record import Record, build_batch, decode_records

ABORT = 0
COMMIT = 1
#: control record types Kafka knows besides the two markers (KRaft's); a reader that is not looking
#: for a marker skips them
CONTROL_TYPE_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                      4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
CURRENT_VERSION = 0
KEY = Struct(">hh")  # version, type
VALUE = Struct(">hi")  # version, coordinator epoch
NO_SEQUENCE = -1


class Marker(NamedTuple):
    commit: bool
    coordinator_epoch: int

    @property
    def type_name(self) -> str:
        return "COMMIT" if self.commit else "ABORT"


def build_marker_batch(*, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                       timestamp_ms: int) -> bytearray:
    """One marker batch at base offset 0 with its CRC set (the log patches the offset in place)."""
    record = Record(offset_delta=0, timestamp_delta=0, key=KEY.pack(CURRENT_VERSION, COMMIT if commit else ABORT),
                    value=VALUE.pack(CURRENT_VERSION, coordinator_epoch))
    return bytearray(build_batch([record], base_timestamp=timestamp_ms, producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE, is_transactional=True,
                                 is_control=True))


def control_type(record: Record) -> int:
    """A control record's type (from its key); RecordsError when the key cannot hold one."""
    key = record.key
    if key is None or len(key) < KEY.size:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "control record key is shorter than version and type")
    version, kind = KEY.unpack_from(key)
    if version < 0:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"control record key version {version}")
    return int(kind)


def marker_of(record: Record) -> Marker:
    """The marker a control record holds; RecordsError when it is not an ABORT/COMMIT or is malformed."""
    kind = control_type(record)
    if kind not in (ABORT, COMMIT):
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"control record type {kind} is not a transaction marker")
    value = record.value
    if value is None or len(value) < VALUE.size:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "transaction marker value is shorter than its fields")
    version, coordinator_epoch = VALUE.unpack_from(value)
    if version < 0:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"transaction marker value version {version}")
    return Marker(kind == COMMIT, coordinator_epoch)


def read_marker(buffer: Buffer, pos: int, header: BatchHeader) -> Marker:
    """The marker in the control batch at `pos`; RecordsError when the batch is not one, or malformed."""
    if not header.is_control:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "not a control batch")
    records = decode_records(buffer, pos, header)
    if len(records) != 1:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, f"a marker batch holds {len(records)} records, not 1")
    return marker_of(records[0])
