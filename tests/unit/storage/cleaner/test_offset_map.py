"""The dedupe table against a dict: latest offset per key, fixed capacity, fresh after clear."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pybroker.storage.cleaner.offset_map import SLOT_BYTES, OffsetMap, key_hash


def test_capacity_follows_the_buffer_size_and_load_factor() -> None:
    table = OffsetMap(4096)
    assert table.slots == 4096 // SLOT_BYTES == 256
    assert table.capacity == int(256 * 0.9)
    tiny = OffsetMap(0)
    assert (tiny.slots, tiny.capacity) == (2, 1)  # never so small that one key cannot be mapped


def test_a_full_map_still_updates_known_keys_but_takes_no_new_ones() -> None:
    table = OffsetMap(4 * SLOT_BYTES, load_factor=0.75)
    assert table.capacity == 3
    for offset, key in enumerate((b"a", b"b", b"c")):
        assert table.put(key, offset)
    assert table.is_full
    assert not table.put(b"d", 3)
    assert table.get(b"d") == -1
    assert table.put(b"a", 4) and table.get(b"a") == 4
    assert table.latest_offset == 4
    table.clear()
    assert (table.size, table.latest_offset, table.get(b"a")) == (0, -1, -1)
    assert table.put(b"d", 9) and table.get(b"d") == 9
    table.close()


def test_hashes_are_nonzero_signed_int64() -> None:
    for key in (b"", b"a", b"\x00" * 10, bytes(range(256))):
        h = key_hash(key)
        assert h != 0 and -(2**63) <= h < 2**63


@given(st.lists(st.tuples(st.binary(max_size=6), st.integers(0, 2**40)), max_size=200),
       st.integers(2, 64))
def test_agrees_with_a_dict_until_full(puts: list[tuple[bytes, int]], slots: int) -> None:
    table = OffsetMap(slots * SLOT_BYTES)
    model: dict[bytes, int] = {}
    for key, offset in puts:
        accepted = table.put(key, offset)
        if key in model or len(model) < table.capacity:
            assert accepted
            model[key] = offset
        else:
            assert not accepted
    assert table.size == len(model)
    for key, offset in model.items():
        assert table.get(key) == offset
    for key, _ in puts:
        if key not in model:
            assert table.get(key) == -1
    table.close()
