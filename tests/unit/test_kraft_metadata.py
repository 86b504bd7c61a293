"""Kafka's KRaft metadata records (protocol/kraft_metadata_records.py) and their replay
(storage/kraft_metadata.py): round trips, hostile bytes, snapshot + log order."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.protocol.kraft_metadata_records import (
    RECORD_TYPES,
    MetadataRecordError,
    decode_record,
    encode_record,
)
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.kraft_metadata import METADATA_DIR, read_kraft_metadata

_KIND = {
    "int8": st.integers(-128, 127), "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1), "int64": st.integers(-(2**63), 2**63 - 1),
    "uuid": st.uuids(), "string": st.text(max_size=40), "nstring": st.none() | st.text(max_size=40),
    "bytes": st.binary(max_size=40), "int32s": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=8),
    "float64": st.floats(allow_nan=False), "bool": st.booleans(),
    "entities": st.lists(st.tuples(st.text(max_size=10), st.none() | st.text(max_size=10)), max_size=3),
}


@st.composite
def _records(draw: st.DrawFn) -> tuple[int, int, dict[str, object]]:
    record_type = draw(st.sampled_from(sorted(RECORD_TYPES)))
    fields = {name: draw(_KIND[kind]) for name, kind in RECORD_TYPES[record_type][1]}
    return record_type, draw(st.integers(0, 300)), fields


@given(_records())
def test_round_trip(case: tuple[int, int, dict[str, object]]) -> None:
    record_type, version, fields = case
    decoded = decode_record(encode_record(record_type, version, fields))
    assert decoded == (RECORD_TYPES[record_type][0], version, fields)


@settings(max_examples=300)
@given(_records(), st.data())
def test_hostile_bytes_get_a_clear_error(case: tuple[int, int, dict[str, object]], data: st.DataObject) -> None:
    """Truncated or mutated values decode or raise MetadataRecordError; nothing else escapes."""
    value = bytearray(encode_record(*case))
    cut = data.draw(st.integers(0, len(value)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(len(value) - 1, 0)), st.integers(0, 255)), max_size=4))
    for pos, byte in flips:
        value[pos] = byte
    for candidate in (bytes(value[:cut]), bytes(value)):
        with contextlib.suppress(MetadataRecordError):
            decode_record(candidate)


def test_giant_lengths_are_refused_before_allocating() -> None:
    # TopicRecord with a name claiming 2**32 - 2 bytes
    with pytest.raises(MetadataRecordError, match="overruns"):
        decode_record(b"\x01\x02\x00" + b"\xff\xff\xff\xff\x0f" + b"x" * 10)
    with pytest.raises(MetadataRecordError, match="frame"):
        decode_record(b"\x00\x02\x00")
    assert decode_record(b"\x01\x63\x00") is None  # a type pybroker does not adopt


def _batch(offset: int, values: list[bytes], *, control: bool = False) -> bytes:
    return build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], base_offset=offset,
                       is_control=control)


def test_replay_takes_the_newest_snapshot_then_the_log_after_it(tmp_path: Path) -> None:
    meta = tmp_path / METADATA_DIR
    meta.mkdir()
    kept, gone, older = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    topic = lambda name, tid: encode_record(2, 0, {"name": name, "topic_id": tid})  # noqa: E731
    part = lambda tid, p: encode_record(3, 0, {"partition_id": p, "topic_id": tid, "replicas": [1]})  # noqa: E731
    config = lambda name, key, value: encode_record(  # noqa: E731
        4, 0, {"resource_type": 2, "resource_name": name, "name": key, "value": value})
    # an older snapshot naming a topic the newer one does not: must not be read
    (meta / "00000000000000000002-0000000001.checkpoint").write_bytes(
        _batch(0, [topic("older", older), part(older, 0)]))
    # the newest snapshot (end offset 3), framed by control batches as Kafka writes them
    (meta / "00000000000000000003-0000000001.checkpoint").write_bytes(
        _batch(0, [b"\x00\x00"], control=True) + _batch(0, [topic("kept", kept), part(kept, 0), part(kept, 1)])
        + _batch(3, [b"\x00\x00"], control=True))
    # the log: offsets below 3 are in the snapshot already (a TopicRecord there would be applied twice)
    (meta / "00000000000000000000.log").write_bytes(
        _batch(0, [topic("older", older), part(older, 0), b"\x01\x63\x00"])
        + _batch(3, [topic("gone", gone), part(gone, 0), config("kept", "retention.ms", "5"),
                     config("kept", "segment.ms", "7"), config("kept", "segment.ms", None),
                     encode_record(9, 0, {"topic_id": gone}), part(kept, 2),
                     encode_record(15, 0, {"broker_id": 1, "broker_epoch": 3, "next_producer_id": 2000})])
        + b"\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00")  # a torn tail
    image = read_kraft_metadata(tmp_path)
    topics = image.topics()
    assert list(topics) == ["kept"]
    assert (topics["kept"].topic_id, topics["kept"].num_partitions) == (kept, 3)
    assert topics["kept"].configs == {"retention.ms": "5"}
    assert image.next_producer_id == 2000
    assert image.problems == []


def test_a_corrupt_batch_stops_that_file_and_is_reported(tmp_path: Path) -> None:
    meta = tmp_path / METADATA_DIR
    meta.mkdir()
    tid = uuid.uuid4()
    good = _batch(0, [encode_record(2, 0, {"name": "t", "topic_id": tid}),
                      encode_record(3, 0, {"partition_id": 0, "topic_id": tid, "replicas": []})])
    bad = _batch(2, [b"\x01\x02\x00\xff\xff\xff\xff\x0f"])
    (meta / "00000000000000000000.log").write_bytes(good + bad)
    image = read_kraft_metadata(tmp_path)
    assert list(image.topics()) == ["t"]
    assert len(image.problems) == 1 and "overruns" in image.problems[0]


def test_an_empty_segment_and_a_compressed_batch(tmp_path: Path) -> None:
    meta = tmp_path / METADATA_DIR
    meta.mkdir()
    tid = uuid.uuid4()
    (meta / "00000000000000000000.log").write_bytes(b"")
    records = [Record(0, 0, None, encode_record(2, 0, {"name": "z", "topic_id": tid})),
               Record(1, 0, None, encode_record(3, 0, {"partition_id": 4, "topic_id": tid, "replicas": None}))]
    (meta / "00000000000000000005.log").write_bytes(build_batch(records, base_offset=5, compression=1))
    topics = read_kraft_metadata(tmp_path).topics()
    assert (topics["z"].topic_id, topics["z"].num_partitions) == (tid, 5)


def test_client_quotas_are_set_and_removed_in_order(tmp_path: Path) -> None:
    def quota(key: str, value: float, remove: bool = False) -> bytes:
        return encode_record(14, 0, {"entity": [("user", "alice"), ("client-id", None)], "key": key, "value": value,
                                     "remove": remove})

    directory = tmp_path / METADATA_DIR
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(_batch(0, [
        quota("producer_byte_rate", 1024.0), quota("consumer_byte_rate", 2048.0),
        quota("producer_byte_rate", 0.0, remove=True)]))
    image = read_kraft_metadata(tmp_path)
    assert image.quotas == {(("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0}}


def test_an_entity_count_past_the_bytes_left_is_refused() -> None:
    value = bytes([1, 14, 0]) + bytes([0xFF, 0xFF, 0xFF, 0x0F])  # a count of 2**28 - 2 entities in 0 bytes
    with pytest.raises(MetadataRecordError):
        decode_record(value)
