"""The Spark reader's decoder: record batches into Arrow columns, checked against kafka-python's reading.

Both builders (the C extension and its pure-Python twin) are fed batches made by our own writer with
every codec, and the batches stock clients (librdkafka, kcat, kafka-python, aiokafka) sent in the golden
Produce frames; each must give exactly the rows kafka-python reads from the same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.spark import arrow_records
from pybroker.protocol.frame_codec import decode_request
from pybroker.protocol.records.codecs import GZIP, LZ4, NONE, SNAPPY, ZSTD
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.spark.arrow_kit import BUILDERS, decode, oracle

pytest.importorskip("pyarrow")

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
BASE_TS = 1_700_000_000_000


def _mixed(count: int) -> list[Record]:
    """Null and empty keys and values, headers on some records (a null header value, a non-ASCII key)."""
    records = []
    for i in range(count):
        key = None if i % 4 == 0 else (b"" if i % 9 == 1 else f"key-{i}".encode())
        value = None if i % 7 == 3 else (b"" if i % 5 == 0 else bytes([i % 256]) * (i % 300))
        headers = [("h", str(i).encode()), ("ünï", None), ("h", b"")] if i % 3 == 0 else []
        records.append(Record(i, i * 7 - 50, key, value, headers))
    return records


@pytest.fixture(params=sorted(BUILDERS))
def builder_cls(request: pytest.FixtureRequest) -> Any:
    return BUILDERS[request.param]


def test_the_compiled_decoder_is_the_one_in_use() -> None:
    if os.environ.get("PYBROKER_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("installed with PYBROKER_PURE_PYTHON=1")
    assert arrow_records.IMPLEMENTATION == "compiled (C)"


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("headers", [True, False])
def test_every_codec_gives_what_kafka_python_reads(builder_cls: Any, codec: str, headers: bool) -> None:
    record_set = b"".join(build_batch(_mixed(n), base_offset=base, base_timestamp=BASE_TS + base,
                                      compression=CODECS[codec])
                          for base, n in ((0, 40), (40, 1), (41, 300)))
    rows, walked = decode(builder_cls, record_set, headers=headers)
    assert rows == oracle(record_set, headers=headers)
    assert len(rows) == 341 and walked.position == 341


def _golden_record_sets() -> list[tuple[str, bytes]]:
    found = []
    for path in sorted(GOLDEN.glob("k00v*-*.bin")):
        if "generated" in path.name:
            continue
        _, request = decode_request(path.read_bytes())
        for topic in request.topic_data:
            for partition in topic.partition_data:
                if partition.records:
                    found.append((path.name, bytes(partition.records)))
    return found


def test_batches_stock_clients_wrote_every_codec(builder_cls: Any) -> None:
    """librdkafka, kcat, kafka-python and aiokafka batches (the frames kept hold none and gzip; every codec of
    librdkafka's is read from a real broker in tests/integration/spark/test_fetch_reader.py)."""
    record_sets = _golden_record_sets()
    assert {name.split("-")[1] for name, _ in record_sets} >= {"librdkafka", "kcat", "kafka", "aiokafka"}
    codecs = set()
    for name, record_set in record_sets:
        codecs.add(record_set[22] & 7)  # the attributes' low byte (offset 21 + 1) holds the codec
        rows, walked = decode(builder_cls, record_set)
        assert rows == oracle(record_set), name
        assert walked.batches >= 1
    assert codecs >= {NONE, GZIP}


def test_log_append_time_gives_every_record_the_batch_time(builder_cls: Any) -> None:
    batch = build_batch(_mixed(5), base_offset=10, base_timestamp=BASE_TS, timestamp_type=1,
                        max_timestamp=BASE_TS + 12345)
    rows, _ = decode(builder_cls, batch)
    assert rows == oracle(batch)
    assert {(r[3], r[4]) for r in rows} == {(BASE_TS + 12345, 1)}


def test_offsets_outside_the_range_are_not_rows(builder_cls: Any) -> None:
    batch = build_batch(_mixed(20), base_offset=100, base_timestamp=BASE_TS)
    rows, walked = decode(builder_cls, batch, position=105, end=111)
    assert [r[2] for r in rows] == list(range(105, 111))
    assert rows == oracle(batch, position=105, end=111)
    assert walked.position == 120  # past the whole batch: the task is done with it


def test_compaction_holes_keep_each_record_its_offset(builder_cls: Any) -> None:
    kept = [Record(d, d, f"k{d}".encode(), b"v") for d in (0, 3, 4, 9)]
    batch = build_batch(kept, base_offset=50, base_timestamp=BASE_TS, last_offset_delta=11)
    rows, walked = decode(builder_cls, batch)
    assert [r[2] for r in rows] == [50, 53, 54, 59]
    assert walked.position == 62


def test_a_header_key_that_is_not_utf8_reads_as_java_reads_it(builder_cls: Any) -> None:
    bad = b"ok\xff\xc3(\xe2\x82".decode("utf-8", "surrogateescape")  # Record keeps the bytes this way
    batch = build_batch([Record(0, 0, b"k", b"v", [(bad, b"x"), ("fine", b"y")])], base_timestamp=BASE_TS)
    rows, _ = decode(builder_cls, batch)
    expected_key = b"ok\xff\xc3(\xe2\x82".decode("utf-8", "replace")
    assert rows[0][5] == [(expected_key, b"x"), ("fine", b"y")]


def test_a_timestamp_spark_cannot_hold_is_refused(builder_cls: Any) -> None:
    batch = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=2**62)
    with pytest.raises(Exception, match="outside Spark's timestamp range") as caught:
        decode(builder_cls, batch)
    assert "events-3 batch at offset 0" in str(caught.value)


def test_both_builders_give_the_same_buffers() -> None:
    if len(BUILDERS) < 2:
        pytest.skip("the compiled builder is not built")
    batch = build_batch(_mixed(100), base_offset=7, base_timestamp=BASE_TS)
    outputs = []
    for cls in BUILDERS.values():
        builder = cls(True)
        assert builder.add_batch(batch, 61, len(batch), 100, 7, 99, BASE_TS, 0, 0, 0, 2**62) == 100
        outputs.append(builder.finish())
    assert outputs[0] == outputs[1]


records_strategy = st.lists(st.builds(
    Record,
    offset_delta=st.just(0),
    timestamp_delta=st.integers(-(2**40), 2**40),
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=200),
    headers=st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3),
), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(records=records_strategy, gaps=st.lists(st.integers(1, 5), min_size=30, max_size=30),
       codec=st.sampled_from(sorted(CODECS.values())), base=st.integers(0, 2**40),
       log_append=st.booleans(), headers=st.booleans())
def test_any_batch_reads_as_kafka_python_reads_it(records: list[Record], gaps: list[int], codec: int, base: int,
                                                  log_append: bool, headers: bool) -> None:
    delta = 0
    for record, gap in zip(records, gaps, strict=False):
        record.offset_delta = delta
        delta += gap
    batch = build_batch(records, base_offset=base, base_timestamp=BASE_TS, compression=codec,
                        timestamp_type=1 if log_append else 0,
                        max_timestamp=BASE_TS + 99 if log_append else None)
    expected = oracle(batch, headers=headers)
    for cls in BUILDERS.values():
        rows, _ = decode(cls, batch, headers=headers)
        assert rows == expected
