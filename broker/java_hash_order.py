"""The order in which a Java `HashMap` or `HashSet` of strings iterates them: where Kafka's answer lists one.

Kafka's SASL handshake answers its enabled mechanisms as `new ArrayList<>(new HashSet<>(configured))`, and
its SCRAM credential APIs answer users in the order of a `HashMap` keyed by name, so a client sees them in
hash order, not in the order it asked. Reproducing that order is what makes our answer the same as Kafka's.
The facts used: `String.hashCode` (s[0]*31^(n-1) + ... over UTF-16 code units, 32-bit), HashMap's spreading
of a hash (h ^ h >>> 16) into a power-of-two table that doubles when it holds more than 3/4 of its size
(16 slots by default; a `HashSet(Collection)` starts at max(n / .75 + 1, 16)), and that entries in one slot
keep their insertion order across doublings. Tables never shrink, so the size that counts is the most
entries the map ever held. (A slot turns into a tree past 8 entries only in tables of 64 slots or more,
which names of Kafka's answers never reach in practice.) Pure functions, any thread.
"""

from __future__ import annotations

from collections.abc import Iterable

_MASK = 0xFFFFFFFF


def string_hash(text: str) -> int:
    """Java's `String.hashCode`, as an unsigned 32-bit value."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _MASK
    return h


def _copy_table_size(count: int) -> int:
    wanted = max(int(count / 0.75) + 1, 16)
    size = 1
    while size < wanted:
        size <<= 1
    return size


def _default_table_size(peak: int) -> int:
    size = 16
    while peak > size * 3 // 4:
        size <<= 1
    return size


def _in_slot_order(unique: list[str], size: int) -> list[str]:
    slots = size - 1

    def slot(text: str) -> int:
        h = string_hash(text)
        return (h ^ (h >> 16)) & slots

    return sorted(unique, key=slot)  # a stable sort: one slot's entries keep their insertion order


def hash_set_order(items: Iterable[str]) -> list[str]:
    """`items` without repeats, in the order `new ArrayList<>(new HashSet<>(items))` gives them."""
    unique = list(dict.fromkeys(items))
    return _in_slot_order(unique, _copy_table_size(len(unique)))


def hash_map_order(keys: Iterable[str], peak: int | None = None) -> list[str]:
    """The keys of a `new HashMap<>()` that had `keys` put in this order (repeats keep their first place),
    as its `keySet()` iterates them; `peak`: the most entries it ever held, if removals made it smaller."""
    unique = list(dict.fromkeys(keys))
    return _in_slot_order(unique, _default_table_size(max(peak or 0, len(unique))))
