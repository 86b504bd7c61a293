"""Transaction markers: built in Kafka's control-batch format, read back, refused when malformed."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from pybroker.protocol.records.batch import crc_ok, parse_header
from pybroker.protocol.records.control import ABORT, COMMIT, Marker, build_marker_batch, read_marker
from pybroker.protocol.records.record import Record, build_batch, decode_records

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)


@given(producer_id=st.integers(0, 2**63 - 1), epoch=st.integers(0, 2**15 - 1), coordinator_epoch=INT32,
       commit=st.booleans(), ts=st.integers(0, 2**50))
def test_build_then_read(producer_id: int, epoch: int, coordinator_epoch: int, commit: bool, ts: int) -> None:
    data = build_marker_batch(producer_id=producer_id, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
                              commit=commit, timestamp_ms=ts)
    header = parse_header(data)
    assert isinstance(data, bytearray) and crc_ok(data, 0, header)
    assert header.is_control and header.is_transactional and header.base_offset == 0
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (producer_id, epoch, -1)
    assert header.records_count == 1 and header.last_offset_delta == 0 and header.max_timestamp == ts
    assert read_marker(data, 0, header) == Marker(commit, coordinator_epoch)
    record = decode_records(data, 0, header)[0]
    assert record.key == struct.pack(">hh", 0, COMMIT if commit else ABORT)
    assert record.value == struct.pack(">hi", 0, coordinator_epoch)


@pytest.mark.parametrize("commit", [True, False])
def test_kafka_python_reads_our_marker(commit: bool) -> None:
    data = build_marker_batch(producer_id=42, producer_epoch=3, coordinator_epoch=7, commit=commit, timestamp_ms=5)
    batch = DefaultRecordBatch(bytes(data))
    assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
    (record,) = list(batch)
    assert record.commit is commit and record.abort is not commit and record.version == 0
    assert struct.unpack(">hi", record.value) == (0, 7)


def test_aiokafka_reads_our_marker() -> None:
    data = build_marker_batch(producer_id=42, producer_epoch=3, coordinator_epoch=7, commit=False, timestamp_ms=5)
    batch = AioBatch(bytes(data))
    assert batch.is_control_batch and batch.is_transactional and batch.producer_id == 42
    assert batch.validate_crc()
    (record,) = list(batch)
    assert record.key == struct.pack(">hh", 0, ABORT)


def _control_batch(key: bytes | None, value: bytes | None, records: int = 1) -> bytes:
    return build_batch([Record(i, 0, key, value) for i in range(records)], producer_id=1, producer_epoch=0,
                       is_transactional=True, is_control=True)


def test_newer_versions_are_read_by_their_known_fields() -> None:
    data = _control_batch(struct.pack(">hh", 1, COMMIT) + b"x", struct.pack(">hi", 3, 9) + b"future")
    assert read_marker(data, 0, parse_header(data)) == Marker(True, 9)


@pytest.mark.parametrize(("key", "value", "records"), [
    (b"\x00", struct.pack(">hi", 0, 1), 1),                   # key too short
    (None, struct.pack(">hi", 0, 1), 1),                       # no key
    (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1), 1),   # LEADER_CHANGE: not a marker
    (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1), 1),  # negative version
    (struct.pack(">hh", 0, 1), b"\x00\x00", 1),                # value too short
    (struct.pack(">hh", 0, 1), None, 1),                        # no value
    (struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 1), 2),   # two records
])
def test_malformed_markers_are_refused(key: bytes | None, value: bytes | None, records: int) -> None:
    from pybroker.protocol.records.batch import RecordsError
    data = _control_batch(key, value, records)
    with pytest.raises(RecordsError):
        read_marker(data, 0, parse_header(data))


def test_a_data_batch_is_not_a_marker() -> None:
    from pybroker.protocol.records.batch import RecordsError
    data = build_batch([Record(0, 0, b"k", b"v")])
    with pytest.raises(RecordsError):
        read_marker(data, 0, parse_header(data))
