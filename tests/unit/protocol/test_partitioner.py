"""Keys land where Kafka's default partitioner puts them: murmur2 against Kafka's own published values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from pybroker.protocol.partitioner import murmur2, partition_for_key

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java)
KAFKA_VALUES = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_VALUES)
def test_murmur2_gives_kafkas_values(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@given(st.binary(max_size=64))
def test_partitions_agree_with_kafka_python(data: bytes) -> None:
    # kafka-python's partitioner is the independent oracle: toPositive(murmur2) % n
    for n in (1, 3, 7, 100):
        assert partition_for_key(data, n) == (kafka_python_murmur2(data) & 0x7FFFFFFF) % n


def test_a_topic_without_partitions_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for_key(b"k", 0)
