"""Kafka's default partitioner for keyed records: murmur2 of the key bytes, made positive, modulo the count.

Why this exact hash: a key must land in the partition every other producer (the Java client, Spark's own
Kafka sink, kafka-python, librdkafka's `murmur2_random`) puts it in, or per-key ordering and compacted
topics break. Java computes in 32-bit signed arithmetic; here every step is masked to 32 bits, and the
result is turned back into Java's signed int so it can be checked against Kafka's published values.

Pure Python, no I/O: shared by the clients we ship (the admin CLI's `produce`, the Spark sink).
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Java's `Utils.murmur2(byte[])`: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        for shift, byte in enumerate(data[whole:]):
            h ^= byte << (8 * shift)
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a non-null key: `toPositive(murmur2(key)) % n`."""
    if partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions
