"""The cleaner's dedupe table: xxhash64 of a key to the latest offset seen for it, in fixed memory.

Kafka's `SkimpyOffsetMap`, with xxh64 instead of MD5: the table stores only a 64-bit hash of each key
and an int64 offset, 16 bytes a slot, in one anonymous memory map of `log.cleaner.dedupe.buffer.size`
bytes (pages are only touched as slots fill, and `clear` hands them all back at once). Open addressing
with linear probing; the table accepts new keys only up to `load_factor` of its slots, so a probe
always ends at an empty slot and the cleaner knows when to stop and clean the part it has mapped.

Two distinct keys with the same 64-bit hash would count as one key (the older one's latest value could
be dropped). Kafka accepts the same risk with its 128-bit digest; at 2**64 it needs billions of keys
in one pass to become likely.
"""

from __future__ import annotations

import mmap

import xxhash

SLOT_BYTES = 16  # int64 key hash + int64 offset
DEFAULT_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
_EMPTY = 0
_HASH_MASK = (1 << 64) - 1
_SIGN = 1 << 63


def key_hash(key: bytes) -> int:
    """xxh64 of the key as a signed int64, never 0 (0 marks an empty slot)."""
    digest = xxhash.xxh64_intdigest(key)
    if digest == _EMPTY:
        digest = 1
    return digest - (1 << 64) if digest & _SIGN else digest


class OffsetMap:
    """key hash -> latest offset, at most `capacity` keys, held in `buffer_bytes` of memory."""

    __slots__ = ("_memory", "_slots_view", "capacity", "latest_offset", "size", "slots")

    def __init__(self, buffer_bytes: int, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        #: at least two slots, so one key always fits and a probe always meets an empty slot
        self.slots = max(2, buffer_bytes // SLOT_BYTES)
        self.capacity = max(1, min(int(self.slots * load_factor), self.slots - 1))
        self.size = 0
        #: the largest offset put since the last `clear` (-1: none)
        self.latest_offset = -1
        self._memory: mmap.mmap | None = None
        self._slots_view: memoryview | None = None

    def _table(self) -> memoryview:
        view = self._slots_view
        if view is None:
            self._memory = mmap.mmap(-1, self.slots * SLOT_BYTES)
            view = self._slots_view = memoryview(self._memory).cast("q")
        return view

    @property
    def is_full(self) -> bool:
        """No room for another new key (an existing key can still be updated)."""
        return self.size >= self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        """Record `offset` as the key's latest; False (nothing changed) if the key is new and the map full."""
        wanted = key_hash(key)
        table = self._table()
        slots = self.slots
        slot = (wanted & _HASH_MASK) % slots
        while True:
            found = table[2 * slot]
            if found == wanted:
                break
            if found == _EMPTY:
                if self.size >= self.capacity:
                    return False
                table[2 * slot] = wanted
                self.size += 1
                break
            slot = slot + 1 if slot + 1 < slots else 0
        table[2 * slot + 1] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset recorded for the key, or -1."""
        if self.size == 0:
            return -1
        wanted = key_hash(key)
        table = self._table()
        slots = self.slots
        slot = (wanted & _HASH_MASK) % slots
        while True:
            found = table[2 * slot]
            if found == wanted:
                return int(table[2 * slot + 1])
            if found == _EMPTY:
                return -1
            slot = slot + 1 if slot + 1 < slots else 0

    def clear(self) -> None:
        """Forget every key and give the memory back (the next `put` maps fresh zero pages)."""
        self.close()
        self.size = 0
        self.latest_offset = -1

    def close(self) -> None:
        if self._slots_view is not None:
            self._slots_view.release()
            self._slots_view = None
        if self._memory is not None:
            self._memory.close()
            self._memory = None
