"""Java's HashSet order of strings (broker/java_hash_order.py), checked against values Java gives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pybroker.broker.java_hash_order import hash_map_order, hash_set_order, string_hash


def test_string_hash_is_javas() -> None:
    # "hello".hashCode() == 99162322; "polygenelubricants".hashCode() == Integer.MIN_VALUE; "" is 0
    assert string_hash("hello") == 99162322
    assert string_hash("polygenelubricants") == 0x80000000
    assert string_hash("") == 0
    # a character outside the BMP counts as its two UTF-16 code units: "\U0001F600".hashCode() == 1772899
    assert string_hash("\U0001f600") == 1772899


def test_the_mechanisms_come_in_kafkas_handshake_order() -> None:
    # what Apache Kafka 4.4 answered to a SaslHandshake with sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
    assert hash_set_order(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]) == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]
    # and what Java 17 prints for new ArrayList<>(new HashSet<>(List.of(these four)))
    assert hash_set_order(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]) == [
        "PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"]


@given(st.lists(st.text(max_size=12), max_size=30))
def test_the_order_is_a_permutation_without_repeats(items: list[str]) -> None:
    ordered = hash_set_order(items)
    assert sorted(ordered) == sorted(set(items))


def test_a_hash_map_that_grew_iterates_as_javas() -> None:
    # Java 17: a new HashMap<>() with "cf-user-0" .. "cf-user-39" put in order, then String.join(",", keySet())
    java = ("cf-user-13,cf-user-35,cf-user-14,cf-user-36,cf-user-11,cf-user-33,cf-user-12,cf-user-34,cf-user-17,"
            "cf-user-39,cf-user-18,cf-user-15,cf-user-37,cf-user-16,cf-user-38,cf-user-2,cf-user-3,cf-user-0,"
            "cf-user-1,cf-user-6,cf-user-31,cf-user-7,cf-user-10,cf-user-32,cf-user-4,cf-user-5,cf-user-30,"
            "cf-user-24,cf-user-25,cf-user-22,cf-user-23,cf-user-28,cf-user-29,cf-user-26,cf-user-27,cf-user-20,"
            "cf-user-21,cf-user-8,cf-user-9,cf-user-19")
    assert ",".join(hash_map_order(f"cf-user-{i}" for i in range(40))) == java
