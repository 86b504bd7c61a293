"""`__transaction_state` keys and values: byte layouts as Kafka's TransactionLog writes them, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.protocol.messages.transaction_records import TransactionLogValue
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.transaction_log_records import (
    TransactionRecord,
    TransactionStatus,
    decode_transaction_record,
    encode_transaction_key,
    encode_transaction_value,
    partitions_of,
    transaction_log_value,
)

text = st.text(max_size=20)


def _ongoing(**extra: int) -> TransactionLogValue:
    return transaction_log_value(
        producer_id=7, producer_epoch=3, transaction_timeout_ms=60000, status=TransactionStatus.ONGOING,
        partitions=[("t", 0), ("u", 2), ("t", 1)], last_update_timestamp_ms=1000, start_timestamp_ms=900, **extra)


def test_key_layout_is_kafkas() -> None:
    # key version 0 (the transaction log's record type), then the id as an int16-length string
    assert encode_transaction_key("tx") == b"\x00\x00" + b"\x00\x02tx"


def test_value_v0_layout() -> None:
    expected = (b"\x00\x00" + struct.pack(">qhib", 7, 3, 60000, 1)
                + struct.pack(">i", 2)  # two topics, classic int32 count
                + b"\x00\x01t" + struct.pack(">iii", 2, 0, 1)
                + b"\x00\x01u" + struct.pack(">ii", 1, 2)
                + struct.pack(">qq", 1000, 900))
    assert encode_transaction_value(_ongoing(previous_producer_id=5), version=0) == expected  # v0: no tags


def test_value_v1_layout_with_tagged_fields() -> None:
    value = _ongoing(previous_producer_id=5, next_producer_id=6, client_transaction_version=2)
    expected = (b"\x00\x01" + struct.pack(">qhib", 7, 3, 60000, 1)
                + b"\x03"  # compact count: two topics + 1
                + b"\x02t" + b"\x03" + struct.pack(">ii", 0, 1) + b"\x00"  # each struct ends with its tags
                + b"\x02u" + b"\x02" + struct.pack(">i", 2) + b"\x00"
                + struct.pack(">qq", 1000, 900)
                + b"\x03"  # three tagged fields, by tag
                + b"\x00\x08" + struct.pack(">q", 5)
                + b"\x01\x08" + struct.pack(">q", 6)
                + b"\x02\x02" + struct.pack(">h", 2))
    assert encode_transaction_value(value) == expected


def test_empty_state_writes_null_partitions_and_refuses_any() -> None:
    value = transaction_log_value(producer_id=1, producer_epoch=0, transaction_timeout_ms=1,
                                  status=TransactionStatus.EMPTY, last_update_timestamp_ms=0, start_timestamp_ms=-1)
    assert value.transaction_partitions is None
    assert encode_transaction_value(value, 0)[17:21] == b"\xff\xff\xff\xff"  # null array, classic
    assert encode_transaction_value(value)[17:18] == b"\x00"  # null array, compact
    with pytest.raises(ValueError):
        transaction_log_value(producer_id=1, producer_epoch=0, transaction_timeout_ms=1,
                              status=TransactionStatus.EMPTY, partitions=[("t", 0)],
                              last_update_timestamp_ms=0, start_timestamp_ms=-1)


@given(text, st.sampled_from(list(TransactionStatus)), st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1),
       st.lists(st.tuples(text, st.integers(0, 2**31 - 1)), max_size=5), st.integers(-1, 2**62),
       st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(0, 2), st.sampled_from([0, 1]))
def test_records_round_trip(tid: str, status: TransactionStatus, pid: int, epoch: int,
                            partitions: list[tuple[str, int]], ts: int, next_pid: int, next_epoch: int,
                            tv: int, version: int) -> None:
    if status == TransactionStatus.EMPTY:
        partitions = []
    value = transaction_log_value(
        producer_id=pid, producer_epoch=epoch, transaction_timeout_ms=60000, status=status, partitions=partitions,
        last_update_timestamp_ms=ts, start_timestamp_ms=ts, previous_producer_id=pid, next_producer_id=next_pid,
        next_producer_epoch=next_epoch, client_transaction_version=tv)
    record = decode_transaction_record(encode_transaction_key(tid), encode_transaction_value(value, version))
    assert record is not None and record.transactional_id == tid and record.value is not None
    assert sorted(partitions_of(record.value)) == sorted(partitions)
    if version == 1:
        assert record.value == value
    else:  # v0 carries no tagged field: they read back as their defaults
        assert record.value.previous_producer_id == -1 and record.value.next_producer_epoch == -1
        assert record.value.producer_id == pid and record.value.transaction_status == status
    assert decode_transaction_record(encode_transaction_key(tid), None) == TransactionRecord(tid, None)


def test_state_names_are_kafkas() -> None:
    assert [s.state_name for s in TransactionStatus] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
    assert TransactionStatus.from_name("PrepareAbort") is TransactionStatus.PREPARE_ABORT
    assert TransactionStatus.from_name("prepareabort") is None


def test_other_key_versions_are_skipped_and_bad_values_refused() -> None:
    key = encode_transaction_key("tx")
    assert decode_transaction_record(b"\x00\x01" + key[2:], b"\x00\x00") is None
    good = encode_transaction_value(_ongoing())
    for bad in (b"", b"\x00", b"\x00\x02" + good[2:], good[:-3]):
        with pytest.raises(DecodeError):
            decode_transaction_record(key, bad)
    unknown_state = bytearray(good)
    unknown_state[2 + 14] = 9  # the state byte follows producer id, epoch and timeout
    with pytest.raises(DecodeError):
        decode_transaction_record(key, bytes(unknown_state))
    with pytest.raises(DecodeError):
        decode_transaction_record(b"\x00", None)
