"""The RecordBatch v2 header: one precompiled Struct, named offsets, CRC-32C, in-place patching.

Records stay opaque on the hot path: the broker reads this 61-byte header, checks the CRC-32C over
`attributes`..end of batch, and patches `base_offset` and `partition_leader_epoch` in place (both lie
before the CRC-covered range, so patching them never invalidates the CRC).

The layout is the table `_FIELDS` below (big-endian); every `*_OFFSET` constant is computed from it
with `calcsize`, so the offsets cannot drift from the Struct.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from struct import Struct, calcsize
from typing import NamedTuple, cast

from pybroker.protocol.errors import ErrorCode

#: anything a batch can be read from
Buffer = bytes | bytearray | memoryview
#: anything a batch can be patched in
WritableBuffer = bytearray | memoryview

# (field, struct code): the on-wire order of the header of a v2 record batch
_FIELDS: tuple[tuple[str, str], ...] = (
    ("base_offset", "q"),             # offset of the first record; 0 from producers, set by the broker
    ("batch_length", "i"),            # bytes after this field (the whole batch minus LOG_OVERHEAD)
    ("partition_leader_epoch", "i"),  # leader epoch at append time; set by the broker, outside the CRC
    ("magic", "b"),                   # record format version: 2 (0 and 1 are the old message sets)
    ("crc", "I"),                     # CRC-32C (Castagnoli) of attributes..end of batch
    ("attributes", "h"),              # bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                      # 6 delete horizon set (base_timestamp holds it); the rest unused
    ("last_offset_delta", "i"),       # offset delta of the last record (records_count - 1 from producers)
    ("base_timestamp", "q"),          # timestamp of the first record (or the delete horizon, bit 6)
    ("max_timestamp", "q"),           # largest record timestamp, or the log append time (bit 3)
    ("producer_id", "q"),             # -1 unless idempotent or transactional
    ("producer_epoch", "h"),          # -1 unless idempotent or transactional
    ("base_sequence", "i"),           # sequence of the first record, -1 without a producer id
    ("records_count", "i"),           # number of records that follow (compressed or not)
)

HEADER = Struct(">" + "".join(code for _, code in _FIELDS))
HEADER_SIZE = HEADER.size  # 61
_OFFSETS: dict[str, int] = {
    name: calcsize(">" + "".join(code for _, code in _FIELDS[:index])) for index, (name, _) in enumerate(_FIELDS)
}

BASE_OFFSET_OFFSET = _OFFSETS["base_offset"]
BATCH_LENGTH_OFFSET = _OFFSETS["batch_length"]
PARTITION_LEADER_EPOCH_OFFSET = _OFFSETS["partition_leader_epoch"]
MAGIC_OFFSET = _OFFSETS["magic"]
CRC_OFFSET = _OFFSETS["crc"]
ATTRIBUTES_OFFSET = _OFFSETS["attributes"]
LAST_OFFSET_DELTA_OFFSET = _OFFSETS["last_offset_delta"]
BASE_TIMESTAMP_OFFSET = _OFFSETS["base_timestamp"]
MAX_TIMESTAMP_OFFSET = _OFFSETS["max_timestamp"]
PRODUCER_ID_OFFSET = _OFFSETS["producer_id"]
PRODUCER_EPOCH_OFFSET = _OFFSETS["producer_epoch"]
BASE_SEQUENCE_OFFSET = _OFFSETS["base_sequence"]
RECORDS_COUNT_OFFSET = _OFFSETS["records_count"]
RECORDS_OFFSET = HEADER_SIZE

#: base_offset + batch_length: the part of a batch that batch_length does not count
LOG_OVERHEAD = PARTITION_LEADER_EPOCH_OFFSET  # 12
#: the smallest legal batch_length: a header with no records
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

MAGIC_V2 = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT64 = Struct(">q")
#: base_offset, batch_length and partition_leader_epoch: the three fields before `magic`, written at once
_OFFSET_LENGTH_EPOCH = Struct(">qii")
_INT32 = Struct(">i")
_INT16 = Struct(">h")
_UINT32 = Struct(">I")


class RecordsError(Exception):
    """Records refused or unreadable, with the Kafka error code the partition's answer carries.

    `record_errors` names the records to blame, as (index in the batch, message): Produce v8+ answers
    them (`record_errors`), so a client can tell which records of a batch were refused and why."""

    def __init__(self, error_code: int, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.record_errors = record_errors


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (5-7 are not codecs)."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (then max_timestamp is every record's timestamp)."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def has_producer_id(self) -> bool:
        """Kafka's test: any id above -1 (NO_PRODUCER_ID) marks an idempotent or transactional batch."""
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes of the whole batch, LOG_OVERHEAD included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record, wrapping at int32 as Kafka's producers do."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def attributes_for(compression: int = 0, timestamp_type: int = CREATE_TIME, *, is_transactional: bool = False,
                   is_control: bool = False, has_delete_horizon: bool = False) -> int:
    """The attributes word as Kafka composes it (unused bits always clear)."""
    attributes = compression & COMPRESSION_MASK
    flags = ((timestamp_type == LOG_APPEND_TIME, TIMESTAMP_TYPE_MASK), (is_transactional, TRANSACTIONAL_MASK),
             (is_control, CONTROL_MASK), (has_delete_horizon, DELETE_HORIZON_MASK))
    for present, mask in flags:
        if present:
            attributes |= mask
    return attributes


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`; the batch's body is not looked at."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "record batch shorter than its 61-byte header")
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def iter_batches(buf: Buffer, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in buf[pos:end]; stops quietly at an incomplete tail.

    A length field below the legal minimum also ends the walk: nothing after it can be trusted to be a
    batch boundary (log recovery truncates there).
    """
    end = len(buf) if end is None else min(end, len(buf))
    unpack = HEADER.unpack_from
    while end - pos >= HEADER_SIZE:
        header = BatchHeader._make(unpack(buf, pos))
        size = header.batch_length + LOG_OVERHEAD
        if header.batch_length < MIN_BATCH_LENGTH or pos + size > end:
            return
        yield pos, header
        pos += size


#: the `crc32c` package's function, imported at its first use rather than with this module: importing that
#: package looks its own version up in the installed distributions' metadata. A broker's start installs the
#: same function loaded from the package's extension module alone (`storage/crc32c_extension.py`), before the
#: live metadata log checks its batches; tools that never check a CRC never import it. Any thread may call these.
_crc32c_function: Callable[[Buffer], int] | None = None


def load_crc32c() -> Callable[[Buffer], int]:
    """The CRC-32C function, importing its package the first time."""
    global _crc32c_function
    if _crc32c_function is None:
        import crc32c

        _crc32c_function = crc32c.crc32c
    return _crc32c_function


def install_crc32c(function: Callable[[Buffer], int]) -> None:
    """Use `function`, the same CRC-32C loaded another way (`storage/crc32c_extension.py`), from now on."""
    global _crc32c_function
    _crc32c_function = function


def crc32c_of(data: Buffer) -> int:
    """CRC-32C (Castagnoli) of `data`."""
    function = _crc32c_function
    if function is None:
        function = load_crc32c()
    return int(function(data))


def compute_crc(buf: Buffer, pos: int, header: BatchHeader) -> int:
    """CRC-32C of attributes..end of the batch at `pos`, as the header's `crc` field should hold it."""
    with memoryview(buf) as view:
        return crc32c_of(view[pos + ATTRIBUTES_OFFSET : pos + header.size])


def crc_ok(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    """True when the batch is whole and its stored CRC matches its bytes."""
    if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > len(buf):
        return False
    return compute_crc(buf, pos, header) == header.crc


def patch_base_offset(buf: WritableBuffer, pos: int, base_offset: int) -> None:
    """Assign the batch's first offset in place (outside the CRC: no recomputation needed)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def patch_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Stamp the partition leader epoch in place (outside the CRC: no recomputation needed)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def assign_offsets(buf: WritableBuffer, pos: int, header: BatchHeader, base_offset: int,
                   leader_epoch: int) -> BatchHeader:
    """Patch the batch's first offset and leader epoch in place (outside the CRC) and return its header as
    the bytes now say, built from `header` (which must describe the rest of the batch as it is) rather
    than parsed again: the log's append step, once per batch."""
    batch_length = header[1]
    _OFFSET_LENGTH_EPOCH.pack_into(buf, pos, base_offset, batch_length, leader_epoch)
    # the fields in `_FIELDS` order, the first three replaced; tuple.__new__ is the cheapest way to the NamedTuple
    return cast(BatchHeader, tuple.__new__(BatchHeader, (base_offset, batch_length, leader_epoch, *header[3:])))


def restamp(buf: WritableBuffer, pos: int, header: BatchHeader, timestamp_type: int,
            max_timestamp: int) -> BatchHeader:
    """Kafka's `setMaxTimestamp` on the batch at `pos`, whose current header is `header`: the attributes are
    recomposed with `timestamp_type` (unused bits come out clear), max_timestamp is overwritten and the CRC
    recomputed, all in place; returns the new header without parsing the bytes again."""
    if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > len(buf):
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "batch length does not fit the buffer")
    attributes = attributes_for(header.compression, timestamp_type, is_transactional=header.is_transactional,
                                is_control=header.is_control, has_delete_horizon=header.has_delete_horizon)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    crc = compute_crc(buf, pos, header)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return header._replace(crc=crc, attributes=attributes, max_timestamp=max_timestamp)


def patch_attributes(buf: WritableBuffer, pos: int, attributes: int) -> None:
    """Overwrite the attributes word; the caller must `rewrite_crc` afterwards (it is CRC-covered)."""
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)


def patch_max_timestamp(buf: WritableBuffer, pos: int, timestamp: int) -> None:
    """Overwrite max_timestamp; the caller must `rewrite_crc` afterwards (it is CRC-covered)."""
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)


def rewrite_crc(buf: WritableBuffer, pos: int) -> int:
    """Recompute and store the CRC after a change inside the CRC-covered range; returns the new CRC."""
    header = parse_header(buf, pos)
    if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > len(buf):
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "batch length does not fit the buffer")
    crc = compute_crc(buf, pos, header)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc
