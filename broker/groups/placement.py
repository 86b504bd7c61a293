"""Which `__consumer_offsets` partition holds a group: Kafka's rule, bit for bit.

Kafka places a group at ``abs(groupId.hashCode()) % offsets.topic.num.partitions`` with Java's
``String.hashCode`` (over UTF-16 code units, in 32-bit two's complement) and Kafka's own ``abs``,
which maps ``Integer.MIN_VALUE`` to 0. Matching it means tools that compute a group's partition
themselves find our records where they look for them.
"""

from __future__ import annotations

_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: s[0]*31^(n-1) + ... + s[n-1], wrapping at 32 bits, signed."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(n: int) -> int:
    return 0 if n == _INT_MIN else abs(n)


def partition_for_group(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % num_partitions
