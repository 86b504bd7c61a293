"""Produce-path validation of one partition's records (Produce v3+), header-only unless keys are needed.

The checks, their order and their codes are Kafka 4's, in the three places Kafka makes them:

1. the request (`ProduceRequest.validateRecords`, walking batches as `ByteBufferLogInputStream` does):
   a length field below 14 or a magic byte above 2 is CORRUPT_MESSAGE; records holding no whole batch
   (empty, or truncated) are INVALID_RECORD, as are magic 0/1 and a second whole batch; zstd below
   Produce v7 is UNSUPPORTED_COMPRESSION_TYPE;
2. the log (`UnifiedLog.analyzeAndValidateRecords`): a base offset other than 0 is INVALID_RECORD, a
   batch above `max.message.bytes` is MESSAGE_TOO_LARGE, a batch shorter than its header or with a bad
   CRC-32C is CORRUPT_MESSAGE, and a codec id of 5-7 is UNKNOWN_SERVER_ERROR (Kafka throws an
   IllegalArgumentException there, which its clients see as that code);
3. the validator (`LogValidator.validateBatch`): `records_count` must be positive and equal
   `last_offset_delta + 1`, clients may not write control batches, and a producer id needs a
   sequence: INVALID_RECORD. Only on compacted topics (`require_keys`) are records decoded, to refuse
   a record without a key (INVALID_RECORD) as Kafka does.

Then every record is walked (`records_check`, compiled): the count, offset deltas, lengths, varints,
keys and headers must be exactly what the header says (INVALID_RECORD, as Kafka's DefaultRecord and
batch iterators raise InvalidRecordException), a compressed payload must decompress under the cap
(CORRUPT_MESSAGE), and, on CreateTime topics, each record's timestamp must lie within
message.timestamp.{before,after}.max.ms of the broker's clock (INVALID_TIMESTAMP, Kafka's
`validateTimestamp`). A LogAppendTime batch from a producer is refused on a LogAppendTime topic, or
when its max_timestamp is -1; on a CreateTime topic its max_timestamp is every record's timestamp.

The header checks (`check_produce_batch`) are cheap and run on the event loop; the walk
(`check_produce_records`) decompresses, so callers run it off the loop for compressed batches.
`validate_produce_records` does both.

Where Kafka differs, on purpose:
- bytes after the batch that are not a whole batch: Kafka trims them silently; we refuse them
  (CORRUPT_MESSAGE), since the log writes the buffer as it was received;
- offset deltas that are not 0, 1, 2...: Kafka rebuilds such a compressed batch (and ignores them in
  an uncompressed one); we store batches as received, so we refuse them (INVALID_RECORD);
- none on record timestamps: the walk keeps only the smallest and largest, and when they (or a keyless
  record on a compacted topic) say something is wrong, a second pass judges each record as Kafka's
  `validateRecord` does (a -1 timestamp is skipped), and names every bad record: their indexes and
  messages go into the answer's `record_errors` (Produce v8+), at most `MAX_RECORD_ERRORS` of them.

The batch's max_timestamp is what Kafka recomputes from the records (`ValidatedRecords.max_timestamp`);
the caller patches the header (and its CRC) where it differs, as Kafka's `setMaxTimestamp` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from struct import Struct

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import (
    BATCH_LENGTH_OFFSET,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    NO_TIMESTAMP,
    BatchHeader,
    Buffer,
    RecordsError,
    crc_ok,
    parse_header,
)
from pybroker.protocol.records.codecs import CODEC_NAMES, ZSTD
from pybroker.protocol.records.record import MAX_DECOMPRESSED
from pybroker.protocol.records.records_check import record_facts, walk_batch

#: the smallest length field Kafka's batch walker accepts (a v0 message's overhead); stricter checks follow
_MIN_LENGTH_FIELD = 14
_INT32 = Struct(">i")


@dataclass(slots=True)
class ValidatedRecords:
    """One partition's produced batch once every check passed: the object that travels down to the log.

    `batches` holds the batch's position in `records` and its header, parsed once (by `check_produce_batch`)
    and replaced, never re-parsed, when the partition layer stamps the batch's timestamps (it may then also
    replace `records` by a writable copy and set `log_append_time`)."""

    records: Buffer
    batches: list[tuple[int, BatchHeader]]
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    size_bytes: int
    #: the largest record timestamp, as Kafka recomputes it (the log append time is the caller's business)
    max_timestamp: int
    #: the time the partition layer stamped on a LogAppendTime topic's batch, else -1
    log_append_time: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class TimestampRule:
    """A topic's timestamp configuration at the time of the append."""

    now_ms: int
    before_max_ms: int  # message.timestamp.before.max.ms
    after_max_ms: int  # message.timestamp.after.max.ms
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime


def _invalid(message: str) -> RecordsError:
    return RecordsError(ErrorCode.INVALID_RECORD, message)


def _corrupt(message: str) -> RecordsError:
    return RecordsError(ErrorCode.CORRUPT_MESSAGE, message)


# LogValidator.validateBatch for client appends of magic 2, in Kafka's order: (refused when, message)
_BATCH_RULES: tuple[tuple[Callable[[BatchHeader], bool], str], ...] = (
    (lambda h: h.last_offset_delta < 0, "batch has an invalid offset range"),
    (lambda h: h.records_count <= 0, "invalid reported count for record batch"),
    (lambda h: h.records_count != h.last_offset_delta + 1, "inconsistent batch offset range and count of records"),
    (lambda h: h.is_control, "clients are not allowed to write control records"),
    (lambda h: h.has_producer_id and h.base_sequence < 0, "invalid sequence number in a batch with a producer id"),
)


def _whole_batch_size(buf: Buffer, pos: int, end: int) -> int | None:
    """Size of the batch at `pos` if it is whole, None if cut short: Kafka's batch walker, step by step."""
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)
    if length < _MIN_LENGTH_FIELD:
        raise _corrupt(f"record size {length} is less than the minimum record overhead ({_MIN_LENGTH_FIELD})")
    if remaining <= MAGIC_OFFSET:
        return None
    magic = buf[pos + MAGIC_OFFSET]
    if magic > MAGIC_V2:  # the byte is signed on the wire: negative magics land here too
        raise _corrupt(f"invalid magic found in record: {magic}")
    size = length + LOG_OVERHEAD
    return size if size <= remaining else None


def _check_request_shape(buf: Buffer, allow_zstd: bool) -> BatchHeader:
    """Checks Kafka makes on the request, before the log sees it; returns the single batch's header."""
    total = len(buf)
    size = _whole_batch_size(buf, 0, total)
    if size is None:
        raise _invalid("Produce requests with version 3 and above must have at least one whole record batch")
    if buf[MAGIC_OFFSET] != MAGIC_V2:
        raise _invalid("Produce requests with version 3 and above may only contain record batches of magic 2")
    if size < HEADER_SIZE:
        raise _corrupt(f"record batch size {size} is smaller than the minimum overhead {HEADER_SIZE}")
    header = parse_header(buf, 0)
    if not allow_zstd:
        _check_codec(header)
        if header.compression == ZSTD:
            raise RecordsError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                               "Produce requests below version 7 may not use zstd compression")
    if size < total:
        if _whole_batch_size(buf, size, total) is not None:
            raise _invalid("Produce requests may only contain exactly one record batch per partition")
        raise _corrupt(f"{total - size} bytes after the record batch")
    return header


def _check_codec(header: BatchHeader) -> None:
    if header.compression not in CODEC_NAMES:
        raise RecordsError(ErrorCode.UNKNOWN_SERVER_ERROR, f"unknown compression type id: {header.compression}")


def _record_timestamps(header: BatchHeader, min_delta: int, max_delta: int) -> tuple[int, int]:
    """(smallest, largest) record timestamp as a reader computes them."""
    if header.timestamp_type == LOG_APPEND_TIME:
        return header.max_timestamp, header.max_timestamp
    return header.base_timestamp + min_delta, header.base_timestamp + max_delta


def _check_timestamps(header: BatchHeader, lowest: int, highest: int, rule: TimestampRule) -> None:
    """Kafka's `validateTimestamp` over the batch's extreme record timestamps."""
    from_producer_as_append_time = header.timestamp_type == LOG_APPEND_TIME
    if rule.log_append_time or highest == NO_TIMESTAMP:
        if from_producer_as_append_time:
            raise RecordsError(ErrorCode.INVALID_TIMESTAMP,
                               "producers should not set the timestamp type to LogAppendTime")
        return
    earliest, latest = rule.now_ms - rule.before_max_ms, rule.now_ms + rule.after_max_ms
    for timestamp in (lowest, highest):  # a -1 among real timestamps is judged like any other value
        if not earliest <= timestamp <= latest:
            raise RecordsError(ErrorCode.INVALID_TIMESTAMP,
                               f"timestamp {timestamp} is out of range: it should be within [{earliest}, {latest}] "
                               f"(message.timestamp.before.max.ms {rule.before_max_ms}, "
                               f"message.timestamp.after.max.ms {rule.after_max_ms})")


def check_produce_batch(buf: Buffer, *, max_batch_bytes: int, allow_zstd: bool) -> BatchHeader:
    """The header-level checks (request shape, size, CRC, codec, Kafka's batch rules): cheap, on the loop."""
    header = _check_request_shape(buf, allow_zstd)
    if header.base_offset != 0:
        raise _invalid(f"the base offset of a produced record batch must be 0, not {header.base_offset}")
    if header.size > max_batch_bytes:
        raise RecordsError(ErrorCode.MESSAGE_TOO_LARGE,
                           f"record batch of {header.size} bytes exceeds max.message.bytes {max_batch_bytes}")
    if not crc_ok(buf, 0, header):
        raise _corrupt(f"record batch is corrupt (stored crc = {header.crc})")
    _check_codec(header)
    for refused, message in _BATCH_RULES:
        if refused(header):
            raise _invalid(f"{message} (last offset delta {header.last_offset_delta}, "
                           f"{header.records_count} records, producer id {header.producer_id})")
    return header


def check_produce_records(buf: Buffer, header: BatchHeader, *, require_keys: bool = False,
                          max_decompressed: int = MAX_DECOMPRESSED,
                          timestamps: TimestampRule | None = None, partition_name: str = "") -> ValidatedRecords:
    """Walk every record of the batch `check_produce_batch` accepted; decompresses, so it may run in a thread.

    `require_keys` is a compacted topic; `timestamps` (None: no range check) the topic's timestamp rules;
    `partition_name` (`topic-partition`) goes into the record errors' messages, as in Kafka's.
    """
    summary = walk_batch(buf, 0, header, consecutive=True, max_decompressed=max_decompressed)
    lowest, highest = _record_timestamps(header, summary.min_timestamp_delta, summary.max_timestamp_delta)
    suspect = require_keys and summary.first_keyless >= 0
    if timestamps is not None and not suspect:
        try:
            _check_timestamps(header, lowest, highest, timestamps)
        except RecordsError:
            suspect = True
    if suspect:  # the walk's extremes say some record is bad: a second pass names each one, as Kafka does
        errors = _record_errors(buf, header, require_keys, timestamps, max_decompressed, partition_name)
        if errors:
            raise _refusal(errors)
    return ValidatedRecords(
        records=buf,
        batches=[(0, header)],
        record_count=header.records_count,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        size_bytes=header.size,
        max_timestamp=highest,
    )


#: at most this many record errors are listed in an answer (the message still counts them all): a batch of
#: a million keyless records must not make a response of a hundred megabytes
MAX_RECORD_ERRORS = 10_000


def _record_errors(buf: Buffer, header: BatchHeader, require_keys: bool, rule: TimestampRule | None,
                   max_decompressed: int, partition_name: str) -> list[tuple[int, str, ErrorCode]]:
    """Kafka's `LogValidator.validateRecord` for every record: (index, message, code) of each bad one.

    A record without a key on a compacted topic is INVALID_RECORD (checked first, as Kafka does); then,
    on a CreateTime topic, a timestamp (other than -1) outside the allowed range, or a LogAppendTime
    batch from a producer, is INVALID_TIMESTAMP. Each record gets at most one error."""
    keyless, deltas = record_facts(buf, 0, header, max_decompressed)
    no_key = set(keyless) if require_keys else set()
    where = f" in topic partition {partition_name}" if partition_name else ""
    append_time_batch = header.timestamp_type == LOG_APPEND_TIME
    errors: list[tuple[int, str, ErrorCode]] = []
    for index, delta in enumerate(deltas):
        if index in no_key:
            errors.append((index, f"Compacted topic cannot accept message without key{where}",
                           ErrorCode.INVALID_RECORD))
            continue
        if rule is None:
            continue
        timestamp = header.max_timestamp if append_time_batch else header.base_timestamp + delta
        if not rule.log_append_time and timestamp != NO_TIMESTAMP:
            earliest, latest = rule.now_ms - rule.before_max_ms, rule.now_ms + rule.after_max_ms
            if not earliest <= timestamp <= latest:
                errors.append((index, f"Timestamp {timestamp} of message with offset {index} is out of range. "
                                      f"The timestamp should be within [{earliest}, {latest}]",
                               ErrorCode.INVALID_TIMESTAMP))
        elif append_time_batch:
            errors.append((index, "Invalid timestamp type in message. Producer should not set timestamp type "
                                  "to LogAppendTime.", ErrorCode.INVALID_TIMESTAMP))
    return errors


def _refusal(errors: list[tuple[int, str, ErrorCode]]) -> RecordsError:
    """Kafka's `processRecordErrors`: INVALID_TIMESTAMP if any record's timestamp is bad, else INVALID_RECORD
    with the count and the first three errors in the message."""
    listed = tuple((index, message) for index, message, _ in errors[:MAX_RECORD_ERRORS])
    if any(code == ErrorCode.INVALID_TIMESTAMP for _, _, code in errors):
        return RecordsError(ErrorCode.INVALID_TIMESTAMP,
                            "One or more records have been rejected due to invalid timestamp", listed)
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')" for index, message, _ in errors[:3])
    return RecordsError(ErrorCode.INVALID_RECORD,
                        f"One or more records have been rejected due to {len(errors)} record errors in total, "
                        f"and only showing the first three errors at most: [{shown}]", listed)


def validate_produce_records(buf: Buffer, *, max_batch_bytes: int, allow_zstd: bool,
                             require_keys: bool = False,
                             max_decompressed: int = MAX_DECOMPRESSED,
                             timestamps: TimestampRule | None = None, partition_name: str = "") -> ValidatedRecords:
    """Accept one partition's records from a Produce v3+ request or raise RecordsError with Kafka's code.

    `max_batch_bytes` is the topic's max.message.bytes, `allow_zstd` is Produce version >= 7,
    `require_keys` a compacted topic, `max_decompressed` the cap on a compressed payload's size and
    `timestamps` the topic's timestamp rules (None: timestamps are not range-checked). Everything in
    one call, decompression included: the produce handler splits it to keep the loop free.
    """
    header = check_produce_batch(buf, max_batch_bytes=max_batch_bytes, allow_zstd=allow_zstd)
    return check_produce_records(buf, header, require_keys=require_keys, max_decompressed=max_decompressed,
                                 timestamps=timestamps, partition_name=partition_name)
