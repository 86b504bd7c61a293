"""Independent implementations as oracles: kafka-python, aiokafka (its C builder) and librdkafka bytes.

Batches they build are parsed, CRC-checked, decoded and accepted by ours; batches we build are read
back by theirs, in every codec.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from pybroker.protocol.records.batch import crc_ok, parse_header, patch_base_offset, patch_leader_epoch
from pybroker.protocol.records.record import build_batch, decode_records
from pybroker.protocol.records.validate import validate_produce_records
from tests.unit.protocol.records.librdkafka_batches import LIBRDKAFKA_BATCHES
from tests.unit.protocol.records.samples import BASE_TIMESTAMP, CODECS, ROWS, rows_of, sample_records

PRODUCER = (7, 1, 40)  # producer id, epoch, base sequence


def _kafka_python(codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=PRODUCER[0], producer_epoch=PRODUCER[1],
                                        base_sequence=PRODUCER[2], batch_size=1 << 20)
    for i, (key, value, headers) in enumerate(ROWS):
        builder.append(i, timestamp=BASE_TIMESTAMP + i, key=key, value=value, headers=headers)
    return bytes(builder.build())


def _kafka_python_memory_records(codec: int) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 20,
                                   producer_id=PRODUCER[0], producer_epoch=PRODUCER[1], base_sequence=PRODUCER[2])
    for i, (key, value, headers) in enumerate(ROWS):
        builder.append(timestamp=BASE_TIMESTAMP + i, key=key, value=value, headers=headers)
    builder.close()
    return bytes(builder.buffer())


def _aiokafka(codec: int) -> bytes:
    builder = AioBuilder(2, codec, 0, PRODUCER[0], PRODUCER[1], PRODUCER[2], 1 << 20)
    for i, (key, value, headers) in enumerate(ROWS):
        builder.append(i, timestamp=BASE_TIMESTAMP + i, key=key, value=value, headers=headers)
    return bytes(builder.build())


BUILDERS: dict[str, Callable[[int], bytes]] = {
    "kafka-python": _kafka_python,
    "kafka-python-memory-records": _kafka_python_memory_records,
    "aiokafka": _aiokafka,
}


def _check_foreign_batch(raw: bytes, codec: int, producer: tuple[int, int, int]) -> None:
    header = parse_header(raw)
    assert header.size == len(raw)
    assert (header.magic, header.compression, header.records_count, header.last_offset_delta) == (2, codec, 3, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert (header.base_timestamp, header.max_timestamp) == (BASE_TIMESTAMP, BASE_TIMESTAMP + 2)
    assert crc_ok(raw, 0, header)
    records = decode_records(raw, 0, header)
    assert rows_of(records) == ROWS
    assert [(r.offset_delta, r.timestamp_delta) for r in records] == [(0, 0), (1, 1), (2, 2)]
    validated = validate_produce_records(raw, max_batch_bytes=len(raw), allow_zstd=True)
    assert (validated.record_count, validated.size_bytes, validated.producer_id) == (3, len(raw), producer[0])


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_their_batches_read_by_ours(builder: str, codec: int) -> None:
    _check_foreign_batch(BUILDERS[builder](codec), codec, PRODUCER)


@pytest.mark.parametrize("codec", sorted(LIBRDKAFKA_BATCHES))
def test_librdkafka_batches_read_by_ours(codec: int) -> None:
    raw = bytearray(LIBRDKAFKA_BATCHES[codec])
    producer_id = parse_header(raw).producer_id
    _check_foreign_batch(bytes(raw), codec, (producer_id, 0, 0))
    patch_leader_epoch(raw, 0, -1)  # as the client sent it
    patch_base_offset(raw, 0, 0)
    validate_produce_records(raw, max_batch_bytes=1 << 20, allow_zstd=True, require_keys=False)


def _ours(codec: int) -> bytes:
    return build_batch(sample_records(), compression=codec, base_timestamp=BASE_TIMESTAMP, base_offset=10,
                       producer_id=PRODUCER[0], producer_epoch=PRODUCER[1], base_sequence=PRODUCER[2])


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_by_kafka_python(codec: int) -> None:
    raw = _ours(codec)
    theirs = DefaultRecordBatch(bytearray(raw))
    assert theirs.validate_crc()
    assert (theirs.compression_type, theirs.base_offset, theirs.last_offset_delta) == (codec, 10, 2)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == PRODUCER
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs]
    assert got == [(10 + i, BASE_TIMESTAMP + i, k, v, h) for i, (k, v, h) in enumerate(ROWS)]
    log = MemoryRecords(raw + _ours(codec))
    batches = []
    while (batch := log.next_batch()) is not None:
        batches.append(batch)
    assert len(batches) == 2 and all(batch.validate_crc() for batch in batches)


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_by_aiokafka(codec: int) -> None:
    theirs = AioBatch(_ours(codec))
    assert theirs.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs]
    assert got == [(10 + i, BASE_TIMESTAMP + i, k, v, h) for i, (k, v, h) in enumerate(ROWS)]


def test_uncompressed_bytes_equal_kafka_pythons() -> None:
    """Uncompressed, our encoding of the same records is byte-for-byte kafka-python's."""
    ours = build_batch(sample_records(), compression=0, base_timestamp=BASE_TIMESTAMP, producer_id=PRODUCER[0],
                       partition_leader_epoch=0,  # kafka-python writes 0 here where Java writes -1
                       producer_epoch=PRODUCER[1], base_sequence=PRODUCER[2])
    assert ours == _kafka_python(0)
