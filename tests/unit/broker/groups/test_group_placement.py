"""Group placement agrees with Kafka's: values computed once with Java's own String.hashCode."""

from __future__ import annotations

import pytest

from pybroker.broker.groups.placement import java_string_hash, partition_for_group

#: group id -> (Java hashCode, partition of 50, partition of 7), printed by a JVM
JAVA_TABLE = {
    "": (0, 0, 0),
    "a": (97, 47, 6),
    "hello": (99162322, 22, 0),
    "my-group": (-1906497762, 12, 1),
    "console-consumer-12345": (158455506, 6, 6),
    "polygenelubricants": (-2147483648, 0, 0),  # Integer.MIN_VALUE: Kafka's abs makes it 0
    "Aa": (2112, 12, 5),
    "BB": (2112, 12, 5),
    "gr\u00fcppe": (-1233264812, 12, 3),
    "\U0001F600-emoji": (-1200436388, 38, 4),  # a surrogate pair: two UTF-16 code units
    "spark-kafka-source-9f1c": (-1257728582, 32, 5),
    "group_with_a_rather_long_name_0123456789": (-1956651602, 2, 3),
}


@pytest.mark.parametrize(("group_id", "expected"), JAVA_TABLE.items())
def test_matches_java(group_id: str, expected: tuple[int, int, int]) -> None:
    hash_code, of_50, of_7 = expected
    assert java_string_hash(group_id) == hash_code
    assert partition_for_group(group_id, 50) == of_50
    assert partition_for_group(group_id, 7) == of_7
