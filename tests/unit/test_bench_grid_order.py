"""The grid runs each cell's targets in a rotated order, so that no target always goes first, and every
target's consume phase reads the same records."""

from __future__ import annotations

from bench.grid import rotated


def test_each_cell_starts_one_target_further_on() -> None:
    names = ["pybroker", "kafka", "kafka-fsync", "null"]
    orders = [rotated(names, turn) for turn in range(5)]
    assert [order[0] for order in orders] == ["pybroker", "kafka", "kafka-fsync", "null", "pybroker"]
    assert all(sorted(order) == sorted(names) for order in orders)
    assert rotated([], 3) == [] and rotated(["one"], 7) == ["one"]


def test_every_target_consumes_what_every_target_holds() -> None:
    from bench.grid import common_ends

    acked = [{0: 10, 1: 7}, {0: 12, 1: 9, 2: 4}, {1: 8}]
    assert common_ends(acked, 3) == {0: 0, 1: 7, 2: 0}
    assert common_ends([{0: 5, 1: 6}, {0: 6, 1: 5}], 2) == {0: 5, 1: 5}
    assert common_ends([], 2) == {0: 0, 1: 0}
